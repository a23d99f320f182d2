//! Small syntax checks used by validation: UUIDs, URIs with a recognized scheme, base64.

/// Whether `text` is a UUID in its canonical textual form (`8-4-4-4-12` hexadecimal digits).
pub fn is_uuid(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() == 36
        && bytes.iter().enumerate().all(|(index, byte)| match index {
            8 | 13 | 18 | 23 => *byte == b'-',
            _ => byte.is_ascii_hexdigit(),
        })
}

/// URI schemes recognized for `ContentRef.uri` (TP-047). `http` is accepted with `https` as
/// the spec lists "Public HTTP(S) URLs".
pub const RECOGNIZED_URI_SCHEMES: [&str; 6] = ["https", "http", "s3", "gs", "azure", "file"];

/// Why a string is not an acceptable URI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UriProblem {
    /// Not RFC 3986 syntax.
    Syntax(&'static str),
    /// The scheme is not recognized.
    Scheme,
}

/// Checks RFC 3986 syntax (scheme, allowed characters, percent escapes) and the scheme.
pub(crate) fn check_uri(text: &str, extra_schemes: &[String]) -> Result<(), UriProblem> {
    let Some((scheme, rest)) = text.split_once(':') else {
        return Err(UriProblem::Syntax("no scheme"));
    };
    let mut chars = scheme.chars();
    if !chars
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic())
        || !chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    {
        return Err(UriProblem::Syntax("invalid scheme"));
    }
    if rest.is_empty() {
        return Err(UriProblem::Syntax("nothing after the scheme"));
    }
    let bytes = rest.as_bytes();
    let mut index = 0;
    while index < bytes.len() {
        let byte = bytes[index];
        if byte == b'%' {
            let valid = bytes.get(index + 1).is_some_and(u8::is_ascii_hexdigit)
                && bytes.get(index + 2).is_some_and(u8::is_ascii_hexdigit);
            if !valid {
                return Err(UriProblem::Syntax("bad percent escape"));
            }
            index += 3;
            continue;
        }
        let allowed = byte.is_ascii_alphanumeric() || b"-._~:/?#[]@!$&'()*+,;=".contains(&byte);
        if !allowed {
            return Err(UriProblem::Syntax("character not allowed in a URI"));
        }
        index += 1;
    }
    let scheme = scheme.to_ascii_lowercase();
    let recognized = RECOGNIZED_URI_SCHEMES.contains(&scheme.as_str())
        || extra_schemes
            .iter()
            .any(|extra| extra.eq_ignore_ascii_case(&scheme));
    if !recognized {
        return Err(UriProblem::Scheme);
    }
    if matches!(scheme.as_str(), "https" | "http" | "s3" | "gs" | "azure") {
        let authority = rest
            .strip_prefix("//")
            .map(|after| after.split(['/', '?', '#']).next().unwrap_or(""));
        if authority.is_none_or(str::is_empty) {
            return Err(UriProblem::Syntax("missing host or bucket after `//`"));
        }
    }
    Ok(())
}

/// Whether `text` is standard base64 (RFC 4648 §4, padding required, no whitespace).
pub(crate) fn is_base64(text: &str) -> bool {
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return false;
    }
    let padding = bytes.iter().rev().take_while(|byte| **byte == b'=').count();
    padding <= 2
        && bytes[..bytes.len() - padding]
            .iter()
            .all(|byte| byte.is_ascii_alphanumeric() || *byte == b'+' || *byte == b'/')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids() {
        assert!(is_uuid("550e8400-e29b-41d4-a716-446655440001"));
        assert!(!is_uuid("550e8400e29b41d4a716446655440001"));
        assert!(!is_uuid("550e8400-e29b-41d4-a716-44665544000g"));
    }

    #[test]
    fn uris() {
        assert_eq!(check_uri("s3://bucket/key", &[]), Ok(()));
        assert_eq!(check_uri("file:///tmp/x", &[]), Ok(()));
        assert_eq!(check_uri("https://example.com/a%20b", &[]), Ok(()));
        assert_eq!(
            check_uri("ftp://example.com/x", &[]),
            Err(UriProblem::Scheme)
        );
        assert_eq!(check_uri("ipfs://cid", &["ipfs".to_owned()]), Ok(()));
        assert!(matches!(
            check_uri("not a uri", &[]),
            Err(UriProblem::Syntax(_))
        ));
        assert!(matches!(
            check_uri("s3:///key", &[]),
            Err(UriProblem::Syntax(_))
        ));
        assert!(matches!(
            check_uri("https://x/%zz", &[]),
            Err(UriProblem::Syntax(_))
        ));
    }

    #[test]
    fn base64() {
        assert!(is_base64("iVBORw=="));
        assert!(is_base64(""));
        assert!(!is_base64("iVBORw="));
        assert!(!is_base64("iV BOR=="));
    }
}
