//! The URL policies (`strict`, `local`, `off`): which schemes and which address
//! classes each one lets through.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::ip::IpClass;

/// How strictly outbound URLs are checked (`--url-policy`, `urlPolicy`).
///
/// | policy | schemes | addresses allowed |
/// |---|---|---|
/// | `strict` | https | public unicast only |
/// | `local` | http, https | also loopback, private (RFC 1918, fc00::/7), CGNAT 100.64/10 |
/// | `off` | any | any |
///
/// Under `local`, link-local, cloud metadata, multicast, broadcast, unspecified,
/// documentation and other special-purpose addresses stay blocked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UrlPolicy {
    /// https only, public unicast addresses only.
    Strict,
    /// http and https; also loopback, private and CGNAT addresses.
    Local,
    /// Nothing is checked.
    Off,
}

/// All policies, strictest first.
pub const ALL_POLICIES: [UrlPolicy; 3] = [UrlPolicy::Strict, UrlPolicy::Local, UrlPolicy::Off];

impl UrlPolicy {
    /// The name used on the command line and in settings.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Strict => "strict",
            Self::Local => "local",
            Self::Off => "off",
        }
    }

    /// Whether this policy lets URLs with `scheme` (lower case) through.
    pub fn allows_scheme(self, scheme: &str) -> bool {
        match self {
            Self::Strict => scheme == "https",
            Self::Local => scheme == "https" || scheme == "http",
            Self::Off => true,
        }
    }

    /// Whether this policy lets an address of `class` through.
    pub fn allows_class(self, class: IpClass) -> bool {
        match self {
            Self::Strict => class == IpClass::Public,
            Self::Local => matches!(
                class,
                IpClass::Public | IpClass::Loopback | IpClass::Private | IpClass::SharedAddress
            ),
            Self::Off => true,
        }
    }

    /// Whether this policy lets through URLs that `other` would block; used to
    /// warn when an explicit choice weakens a default.
    pub fn is_weaker_than(self, other: UrlPolicy) -> bool {
        self.rank() < other.rank()
    }

    fn rank(self) -> u8 {
        match self {
            Self::Off => 0,
            Self::Local => 1,
            Self::Strict => 2,
        }
    }
}

impl fmt::Display for UrlPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A `--url-policy` / `urlPolicy` value that is not a policy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown URL policy `{0}`: expected one of `strict`, `local`, `off`")]
pub struct ParsePolicyError(pub String);

impl FromStr for UrlPolicy {
    type Err = ParsePolicyError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "strict" => Ok(Self::Strict),
            "local" => Ok(Self::Local),
            "off" => Ok(Self::Off),
            _ => Err(ParsePolicyError(s.to_owned())),
        }
    }
}

/// Where the policy in force was set, for [`choose_policy`].
#[derive(Debug, Clone, Copy, Default)]
pub struct PolicySources<'a> {
    /// `--url-policy` on the command line: the user's explicit choice, which wins.
    pub flag: Option<&'a str>,
    /// `urlPolicy` in the user's settings (or the `--config` file).
    pub user: Option<&'a str>,
    /// `urlPolicy` in a trusted project's settings: applied only when stricter.
    pub project: Option<&'a str>,
}

/// The policy in force and what the user should be told about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyChoice {
    /// The policy.
    pub policy: UrlPolicy,
    /// Warnings: a project value that was ignored because it was looser, or a
    /// policy weaker than the default.
    pub warnings: Vec<String>,
}

/// Chooses the URL policy: `--url-policy` if given; otherwise the user's `urlPolicy`
/// (or `default`), made stricter by the project's `urlPolicy` when that is stricter.
/// A project can never loosen the policy: a looser project value is ignored with a
/// warning. Errors name the source of a value that is not a policy.
pub fn choose_policy(
    sources: PolicySources<'_>,
    default: UrlPolicy,
) -> Result<PolicyChoice, String> {
    let parse = |v: &str, from: &str| {
        v.parse::<UrlPolicy>()
            .map_err(|e| format!("{from}: {e} (use strict, local or off)"))
    };
    let mut warnings = Vec::new();
    let policy = match sources.flag {
        Some(flag) => parse(flag, "--url-policy")?,
        None => {
            let base = match sources.user {
                Some(u) => parse(u, "urlPolicy in the user settings")?,
                None => default,
            };
            match sources.project {
                Some(p) => {
                    let project = parse(p, "urlPolicy in the project settings")?;
                    if project.is_weaker_than(base) {
                        warnings.push(format!(
                            "urlPolicy `{project}` in the project settings is ignored: a project may only make the URL policy stricter than `{base}` (loosen it in your user settings or with --url-policy)"
                        ));
                        base
                    } else {
                        project
                    }
                }
                None => base,
            }
        }
    };
    Ok(PolicyChoice { policy, warnings })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_displays() {
        for p in ALL_POLICIES {
            assert_eq!(p.as_str().parse::<UrlPolicy>(), Ok(p));
            assert_eq!(p.to_string(), p.as_str());
        }
        assert_eq!("STRICT".parse::<UrlPolicy>(), Ok(UrlPolicy::Strict));
        let err = "lax".parse::<UrlPolicy>().unwrap_err();
        assert!(err.to_string().contains("`strict`, `local`, `off`"));
    }

    #[test]
    fn serde_names() {
        assert_eq!(
            serde_json::to_string(&UrlPolicy::Local).unwrap(),
            "\"local\""
        );
        let p: UrlPolicy = serde_json::from_str("\"off\"").unwrap();
        assert_eq!(p, UrlPolicy::Off);
    }

    #[test]
    fn weaker() {
        assert!(UrlPolicy::Local.is_weaker_than(UrlPolicy::Strict));
        assert!(UrlPolicy::Off.is_weaker_than(UrlPolicy::Local));
        assert!(!UrlPolicy::Strict.is_weaker_than(UrlPolicy::Local));
        assert!(!UrlPolicy::Local.is_weaker_than(UrlPolicy::Local));
    }

    #[test]
    fn a_project_only_makes_the_policy_stricter() {
        let choose = |flag, user, project| {
            choose_policy(
                PolicySources {
                    flag,
                    user,
                    project,
                },
                UrlPolicy::Local,
            )
            .unwrap()
        };
        let c = choose(None, None, Some("off"));
        assert_eq!(c.policy, UrlPolicy::Local);
        assert!(
            c.warnings[0].contains("only make the URL policy stricter"),
            "{c:?}"
        );
        assert_eq!(
            choose(None, Some("off"), Some("local")).policy,
            UrlPolicy::Local
        );
        assert_eq!(choose(None, None, Some("strict")).policy, UrlPolicy::Strict);
        assert_eq!(
            choose(None, Some("strict"), Some("local")).policy,
            UrlPolicy::Strict
        );
        assert_eq!(choose(None, Some("off"), None).policy, UrlPolicy::Off);
        assert_eq!(
            choose(Some("off"), None, Some("strict")).policy,
            UrlPolicy::Off
        );
        assert!(choose(None, None, Some("strict")).warnings.is_empty());
        let e = choose_policy(
            PolicySources {
                project: Some("lax"),
                ..Default::default()
            },
            UrlPolicy::Local,
        )
        .unwrap_err();
        assert!(e.contains("project settings"), "{e}");
    }

    #[test]
    fn schemes() {
        assert!(UrlPolicy::Strict.allows_scheme("https"));
        assert!(!UrlPolicy::Strict.allows_scheme("http"));
        assert!(UrlPolicy::Local.allows_scheme("http"));
        assert!(!UrlPolicy::Local.allows_scheme("ftp"));
        assert!(UrlPolicy::Off.allows_scheme("file"));
    }
}
