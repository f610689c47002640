//! The codec's tests: DynamoDB JSON values in and out, and the errors bad input gets.

use super::*;

#[test]
fn binaries_are_padded_base64() {
    let decode_b = |text: &str| decode::<Value>(format!(r#"{{"B":"{text}"}}"#).as_bytes());
    for bytes in [&b""[..], b"a", b"ab", b"abc", b"abcd", &[0, 255, 128, 7, 9]] {
        let text = serde_json::to_string(&Value::B(bytes.into())).unwrap();
        let back: Value = decode(text.as_bytes()).unwrap();
        assert_eq!(back, Value::B(bytes.into()), "{text}");
    }
    assert_eq!(
        serde_json::to_string(&Value::B(b"hello"[..].into())).unwrap(),
        r#"{"B":"aGVsbG8="}"#
    );
    // Bits past the last byte are ignored ("QR==" is "A"), padding must be whole.
    assert_eq!(decode_b("QR==").unwrap(), Value::B(b"A"[..].into()));
    for bad in ["abc", "a=bc", "QQ", "Q===", "QQ==QQ=="] {
        assert!(
            matches!(decode_b(bad), Err(DbError::Serialization(_))),
            "{bad}"
        );
    }
}

#[test]
fn values_decode_and_encode_in_dynamodb_json() {
    let item: Item = decode(
        br#"{"pk":{"S":"a"},"n":{"N":"01.50"},"b":{"B":"AQI="},"l":{"L":[{"BOOL":true},{"NULL":true}]},"m":{"M":{"x":{"SS":["a"]}}}}"#,
    )
    .unwrap();
    assert_eq!(item.get("n"), Some(&Value::n("1.5").unwrap()));
    assert_eq!(item.get("b"), Some(&Value::B(vec![1, 2].into())));
    let back = serde_json::to_string(&item).unwrap();
    let again: Item = decode(back.as_bytes()).unwrap();
    assert_eq!(again, item);
}

#[test]
fn bad_values_are_validation_errors_and_bad_json_serialization_errors() {
    match decode::<Item>(br#"{"n":{"N":"abc"}}"#) {
        Err(DbError::Validation(m)) => assert!(m.contains("numeric"), "{m}"),
        other => panic!("{other:?}"),
    }
    match decode::<Item>(br#"{"n":{"S":"a","N":"1"}}"#) {
        Err(DbError::Validation(m)) => assert!(m.contains("more than one"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        decode::<Item>(br#"{"n": "#),
        Err(DbError::Serialization(_))
    ));
}
