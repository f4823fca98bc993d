//! JAAS configuration values, as Kafka reads `sasl.jaas.config` and
//! `listener.name.<listener>.<mechanism>.sasl.jaas.config`
//! (`clients/src/main/java/org/apache/kafka/common/security/JaasConfig.java`, which tokenizes
//! with `java.io.StreamTokenizer`, and `JaasContext.java`, which wants exactly one module):
//!
//! ```text
//! org.apache.kafka.common.security.plain.PlainLoginModule required
//!     username="admin" password="admin-secret" user_alice="alice-secret";
//! ```
//!
//! Tokens follow StreamTokenizer's rules as Kafka sets it up: `/* */` comments and, from any
//! other `/`, line comments; words
//! of letters, `_`, `$`, then also digits, `.` and `-`; quoted strings in `"` or `'` with Java
//! escapes. A bare number (`key=8192`) is *not* a value for Kafka ("Value not specified for
//! key"), so it is not here either: quote it.

use std::collections::BTreeMap;

/// A JAAS login module's control flag (`AppConfigurationEntry.LoginModuleControlFlag`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlFlag {
    Required,
    Requisite,
    Sufficient,
    Optional,
}

/// One `LoginModule flag options;` entry.
#[derive(Clone, PartialEq, Eq)]
pub struct JaasEntry {
    pub login_module: String,
    pub control_flag: ControlFlag,
    pub options: BTreeMap<String, String>,
}

impl std::fmt::Debug for JaasEntry {
    // Options hold passwords: print only their keys.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JaasEntry")
            .field("login_module", &self.login_module)
            .field("control_flag", &self.control_flag)
            .field("option_keys", &self.options.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// A JAAS value Kafka would refuse, with Kafka's message where it has one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct JaasError(pub String);

#[derive(Debug, PartialEq)]
enum Token {
    Word(String),
    Quoted(String),
    Number,
    Char(char),
}

fn tokenize(text: &str) -> Result<Vec<Token>, JaasError> {
    let chars: Vec<char> = text.chars().collect();
    let word_start = |c: char| c.is_ascii_alphabetic() || c == '_' || c == '$' || c >= '\u{a0}';
    let word_part = |c: char| word_start(c) || c.is_ascii_digit() || c == '.' || c == '-';
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c <= ' ' {
            i += 1;
        } else if c == '/' && chars.get(i + 1) != Some(&'*') {
            // `//` and, as `/` is StreamTokenizer's default comment character, a lone `/` too.
            while i < chars.len() && chars[i] != '\n' && chars[i] != '\r' {
                i += 1;
            }
        } else if c == '/' && chars.get(i + 1) == Some(&'*') {
            i += 2;
            loop {
                if i + 1 >= chars.len() {
                    return Err(JaasError("Unterminated comment in JAAS config".into()));
                }
                if chars[i] == '*' && chars[i + 1] == '/' {
                    i += 2;
                    break;
                }
                i += 1;
            }
        } else if c == '"' || c == '\'' {
            let mut s = String::new();
            i += 1;
            loop {
                let Some(&d) = chars.get(i) else {
                    return Err(JaasError("Unterminated quoted value in JAAS config".into()));
                };
                i += 1;
                if d == c {
                    break;
                }
                // StreamTokenizer ends a quoted string at a line end; Kafka would then read a
                // different value than meant, so refuse instead.
                if d == '\n' || d == '\r' {
                    return Err(JaasError("Unterminated quoted value in JAAS config".into()));
                }
                if d == '\\' {
                    let Some(&e) = chars.get(i) else {
                        return Err(JaasError("Unterminated quoted value in JAAS config".into()));
                    };
                    i += 1;
                    s.push(match e {
                        'n' => '\n',
                        't' => '\t',
                        'r' => '\r',
                        'b' => '\u{8}',
                        'f' => '\u{c}',
                        'a' => '\u{7}',
                        'v' => '\u{b}',
                        other => other,
                    });
                } else {
                    s.push(d);
                }
            }
            out.push(Token::Quoted(s));
        } else if word_start(c) {
            let start = i;
            while i < chars.len() && word_part(chars[i]) {
                i += 1;
            }
            out.push(Token::Word(chars[start..i].iter().collect()));
        } else if c.is_ascii_digit() || c == '.' || c == '-' {
            // StreamTokenizer.parseNumbers: a number token has no string value.
            i += 1;
            while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                i += 1;
            }
            out.push(Token::Number);
        } else {
            out.push(Token::Char(c));
            i += 1;
        }
    }
    Ok(out)
}

fn sval(t: Option<&Token>) -> Option<String> {
    match t {
        Some(Token::Word(s)) | Some(Token::Quoted(s)) => Some(s.clone()),
        _ => None,
    }
}

/// Every entry of a JAAS value (`JaasConfig`'s parser).
pub fn parse_entries(text: &str) -> Result<Vec<JaasEntry>, JaasError> {
    let tokens = tokenize(text)?;
    let mut it = tokens.iter().peekable();
    let mut entries = Vec::new();
    while let Some(first) = it.next() {
        let login_module = sval(Some(first))
            .ok_or_else(|| JaasError("Login module not specified in JAAS config".into()))?;
        let flag = it.next().ok_or_else(|| {
            JaasError("Login module control flag not specified in JAAS config".into())
        })?;
        let flag = sval(Some(flag)).ok_or_else(|| {
            JaasError("Login module control flag is not available in the JAAS config".into())
        })?;
        let control_flag = match flag.to_ascii_uppercase().as_str() {
            "REQUIRED" => ControlFlag::Required,
            "REQUISITE" => ControlFlag::Requisite,
            "SUFFICIENT" => ControlFlag::Sufficient,
            "OPTIONAL" => ControlFlag::Optional,
            _ => {
                return Err(JaasError(format!(
                    "Invalid login module control flag '{flag}' in JAAS config"
                )))
            }
        };
        let mut options = BTreeMap::new();
        let mut terminated = false;
        while let Some(t) = it.next() {
            if *t == Token::Char(';') {
                terminated = true;
                break;
            }
            let key = sval(Some(t)).unwrap_or_else(|| "null".into());
            let value = match (it.next(), it.next()) {
                (Some(Token::Char('=')), v) => sval(v),
                _ => None,
            };
            let value = value.ok_or_else(|| {
                JaasError(format!(
                    "Value not specified for key '{key}' in JAAS config"
                ))
            })?;
            options.insert(key, value);
        }
        if !terminated {
            return Err(JaasError(
                "JAAS config entry not terminated by semi-colon".into(),
            ));
        }
        entries.push(JaasEntry {
            login_module,
            control_flag,
            options,
        });
    }
    if entries.is_empty() {
        return Err(JaasError(
            "Login module not specified in JAAS config".into(),
        ));
    }
    Ok(entries)
}

/// The one entry of a `sasl.jaas.config` value (`JaasContext.loadServerContext` wants one).
pub fn parse(text: &str) -> Result<JaasEntry, JaasError> {
    let mut entries = parse_entries(text)?;
    if entries.len() != 1 {
        return Err(JaasError(format!(
            "JAAS config property contains {} login modules, should be 1 module",
            entries.len()
        )));
    }
    Ok(entries.remove(0))
}

/// A JAAS value that [`parse`] reads back as `entry` (every token quoted, Java escapes).
pub fn to_config_string(entry: &JaasEntry) -> String {
    fn quote(s: &str) -> String {
        let mut q = String::with_capacity(s.len() + 2);
        q.push('"');
        for c in s.chars() {
            match c {
                '"' => q.push_str("\\\""),
                '\\' => q.push_str("\\\\"),
                '\n' => q.push_str("\\n"),
                '\r' => q.push_str("\\r"),
                c => q.push(c),
            }
        }
        q.push('"');
        q
    }
    let flag = match entry.control_flag {
        ControlFlag::Required => "required",
        ControlFlag::Requisite => "requisite",
        ControlFlag::Sufficient => "sufficient",
        ControlFlag::Optional => "optional",
    };
    let mut out = format!("{} {flag}", quote(&entry.login_module));
    for (k, v) in &entry.options {
        out.push_str(&format!(" {}={}", quote(k), quote(v)));
    }
    out.push(';');
    out
}

/// PLAIN's users: every `user_NAME="password"` option, as `PlainServerCallbackHandler` reads
/// them (`"user_" + username`).
pub fn plain_users(
    options: &BTreeMap<String, String>,
) -> std::collections::HashMap<String, String> {
    options
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix("user_")?.to_string(), v.clone())))
        .filter(|(k, _)| !k.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kafka_examples() {
        let e = parse(
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required
               username="admin" password="admin-secret" // the broker's own login
               user_admin="admin-secret" /* a comment */ user_alice='al"ice';"#,
        )
        .unwrap();
        assert_eq!(
            e.login_module,
            "org.apache.kafka.common.security.plain.PlainLoginModule"
        );
        assert_eq!(e.control_flag, ControlFlag::Required);
        assert_eq!(e.options["username"], "admin");
        let users = plain_users(&e.options);
        assert_eq!(users.len(), 2);
        assert_eq!(users["alice"], "al\"ice");
        assert_eq!(users["admin"], "admin-secret");

        let e = parse(r#"a.B Optional k="x\"y\\z\n" k2=word-1.2;"#).unwrap();
        assert_eq!(e.control_flag, ControlFlag::Optional);
        assert_eq!(e.options["k"], "x\"y\\z\n");
        assert_eq!(e.options["k2"], "word-1.2");
        // An empty option list is fine.
        assert!(parse("M sufficient;").unwrap().options.is_empty());
        let round = parse(&to_config_string(&e)).unwrap();
        assert_eq!(round, e);
    }

    #[test]
    fn refuses_what_kafka_refuses() {
        let err = |t: &str| parse(t).unwrap_err().0;
        assert_eq!(err(""), "Login module not specified in JAAS config");
        assert_eq!(
            err("M"),
            "Login module control flag not specified in JAAS config"
        );
        assert_eq!(
            err("M mandatory;"),
            "Invalid login module control flag 'mandatory' in JAAS config"
        );
        assert_eq!(
            err("M required k=\"v\""),
            "JAAS config entry not terminated by semi-colon"
        );
        assert_eq!(
            err("M required k=8192;"),
            "Value not specified for key 'k' in JAAS config"
        );
        assert_eq!(
            err("M required k;"),
            "Value not specified for key 'k' in JAAS config"
        );
        assert_eq!(
            err("M required; N required;"),
            "JAAS config property contains 2 login modules, should be 1 module"
        );
        assert_eq!(parse_entries("M required; N optional;").unwrap().len(), 2);
        assert!(err("M required k=\"unterminated;").contains("Unterminated"));
        assert!(err("M required k=\"line\nend\";").contains("Unterminated"));
    }
}
