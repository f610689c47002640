//! Reading settings by name, the one rule for every group of them: a value given empty counts as
//! not given, a setting not given takes its default, and a value its parser refuses is refused
//! under the setting's name.

use super::{Invalid, Setting, SettingError};

/// Settings read by name from `get` (a flag's name: `poll-interval`, `worker-id`, …).
pub(crate) struct Lookup<F>(pub(crate) F);

impl<F: Fn(&str) -> Option<String>> Lookup<F> {
    /// The value given for `setting`, if any (an empty one is none).
    pub(crate) fn given(&self, setting: Setting) -> Option<String> {
        (self.0)(setting.name).filter(|v| !v.is_empty())
    }

    /// The value given, else the default, parsed; `None`: neither.
    pub(crate) fn optional<T>(
        &self,
        setting: Setting,
        parse: impl Fn(&str) -> Result<T, Invalid>,
    ) -> Result<Option<T>, SettingError> {
        let given = self.given(setting);
        match given.as_deref().or(setting.default) {
            None => Ok(None),
            Some(text) => parse(text).map(Some).map_err(|why| SettingError::Invalid {
                name: setting.name,
                why,
            }),
        }
    }

    /// The value given, else the default, parsed; a setting with neither is refused.
    pub(crate) fn required<T>(
        &self,
        setting: Setting,
        parse: impl Fn(&str) -> Result<T, Invalid>,
    ) -> Result<T, SettingError> {
        self.optional(setting, parse)?.ok_or(SettingError::Invalid {
            name: setting.name,
            why: Invalid("has no default".into()),
        })
    }
}
