//! Reaching the typed input and output through the SDK's interceptor contexts: the SDK's
//! type-erased `Input` and `Output` are not re-exported by `aws-sdk-dynamodb`, so the request and
//! response code ask the contexts themselves, through [`Erased`].

use aws_sdk_dynamodb::config::interceptors::{
    BeforeSerializationInterceptorContextMut, FinalizerInterceptorContextMut,
};
use std::fmt::Debug;

/// Something holding one operation's input or output, whose concrete type is tried by
/// downcasting.
pub(crate) trait Erased {
    fn get<T: Debug + Send + Sync + 'static>(&mut self) -> Option<&mut T>;
}

/// The request's input, before it is serialised.
impl Erased for BeforeSerializationInterceptorContextMut<'_> {
    fn get<T: Debug + Send + Sync + 'static>(&mut self) -> Option<&mut T> {
        self.input_mut().downcast_mut()
    }
}

/// The call's output, when it succeeded; nothing for an error, which is left as it is.
impl Erased for FinalizerInterceptorContextMut<'_> {
    fn get<T: Debug + Send + Sync + 'static>(&mut self) -> Option<&mut T> {
        self.output_or_error_mut()?.as_mut().ok()?.downcast_mut()
    }
}
