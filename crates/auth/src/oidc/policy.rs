//! Who may sign in ([`SignInPolicy::decide`]): admins always, then allowed emails and
//! allowed domains; empty lists admit nobody unless `allow_any` is set. Emails are
//! compared in lower case; a domain matches exactly the part after the last `@` (no
//! subdomains). Decides only from a verified [`Identity`] (an unverified email never
//! gets here: the ID token check refuses it); it must not fetch anything.
//!
//! An admin is named by email, or by account as `sub:<id>` (the issuer's `sub`, compared
//! exactly). Rights by email go with the address: if the issuer gives it to another
//! account, that account is the admin. An account named by `sub` stays the admin
//! whatever its email, and no other account becomes one through an address.

use super::Identity;

/// The team's sign-in rules.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SignInPolicy {
    /// Email domains whose verified addresses may sign in (`example.com`; a leading `@`
    /// is ignored).
    pub allowed_domains: Vec<String>,
    /// Addresses that may sign in.
    pub allowed_emails: Vec<String>,
    /// Who signs in as an admin (always allowed): an address, or `sub:<id>` for the
    /// issuer's account `<id>` whatever its email.
    pub admins: Vec<String>,
    /// Admit every verified email the issuer vouches for (the lists above only pick
    /// admins then). Off unless set explicitly.
    pub allow_any: bool,
}

/// How [`SignInPolicy::admins`] names an account rather than an address.
const ADMIN_SUB_PREFIX: &str = "sub:";

/// A sign-in the policy admits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access {
    /// Whether the user is an admin.
    pub is_admin: bool,
}

/// Why the policy refuses someone: the message names the email and what an admin can
/// configure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Refusal {
    /// The refused email, in lower case.
    pub email: String,
    message: String,
}

fn normalize(list: &[String], strip_at: bool) -> Vec<String> {
    list.iter()
        .map(|s| {
            let s = s.trim().to_lowercase();
            match s.strip_prefix('@') {
                Some(rest) if strip_at => rest.to_string(),
                _ => s,
            }
        })
        .filter(|s| !s.is_empty())
        .collect()
}

impl SignInPolicy {
    /// Whether `who` may sign in, and as what.
    ///
    /// # Errors
    /// A [`Refusal`] naming the email and what an admin must configure to let them in.
    pub fn decide(&self, who: &Identity) -> Result<Access, Refusal> {
        let email = who.email.trim().to_lowercase();
        let (by_sub, by_email): (Vec<&String>, Vec<&String>) = self
            .admins
            .iter()
            .partition(|a| a.trim().starts_with(ADMIN_SUB_PREFIX));
        let admin_account = by_sub.iter().any(|a| {
            a.trim()
                .strip_prefix(ADMIN_SUB_PREFIX)
                .is_some_and(|sub| !sub.is_empty() && sub == who.subject)
        });
        let by_email: Vec<String> = by_email.into_iter().cloned().collect();
        let admins = normalize(&by_email, false);
        if admin_account || admins.contains(&email) {
            return Ok(Access { is_admin: true });
        }
        let emails = normalize(&self.allowed_emails, false);
        let domains = normalize(&self.allowed_domains, true);
        let domain = email.rsplit_once('@').map_or("", |(_, d)| d).to_string();
        if self.allow_any
            || emails.contains(&email)
            || (!domain.is_empty() && domains.contains(&domain))
        {
            return Ok(Access { is_admin: false });
        }
        let message = if emails.is_empty() && domains.is_empty() && self.admins.is_empty() {
            format!(
                "`{email}` may not sign in: this team admits no one yet (no allowed email domains, allowed emails or admins are configured); an admin must add the domain `{domain}`, the address, or list it among the admins (or admit any account explicitly)"
            )
        } else {
            format!(
                "`{email}` may not sign in: the domain `{domain}` is not among the allowed email domains and the address is not among the allowed emails or admins; an admin can add `{domain}` to the allowed domains or `{email}` to the allowed emails"
            )
        };
        Err(Refusal { email, message })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who(email: &str) -> Identity {
        Identity {
            issuer: "https://issuer.example".into(),
            subject: "s".into(),
            email: email.into(),
            email_verified: true,
            name: None,
        }
    }

    fn list(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn empty_lists_admit_nobody_unless_allow_any() {
        let p = SignInPolicy::default();
        let r = p.decide(&who("alice@example.com")).unwrap_err();
        assert_eq!(r.email, "alice@example.com");
        assert!(r.to_string().contains("admits no one yet"), "{r}");
        assert!(r.to_string().contains("example.com"), "{r}");
        let any = SignInPolicy {
            allow_any: true,
            ..Default::default()
        };
        assert_eq!(
            any.decide(&who("alice@example.com")),
            Ok(Access { is_admin: false })
        );
    }

    #[test]
    fn domains_match_exactly_after_the_last_at() {
        let p = SignInPolicy {
            allowed_domains: list(&["Example.com", "@corp.org"]),
            ..Default::default()
        };
        assert!(p.decide(&who("Alice@EXAMPLE.com")).is_ok());
        assert!(
            p.decide(&who("x@corp.org")).is_ok(),
            "a leading @ is ignored"
        );
        for refused in [
            "bob@other.org",
            "eve@sub.example.com",
            "eve@example.com.evil.net",
            "eve@notexample.com",
            "\"a@example.com\"@evil.net",
        ] {
            let r = p.decide(&who(refused)).unwrap_err();
            assert!(r.to_string().contains(&refused.to_lowercase()), "{r}");
            assert!(r.to_string().contains("allowed domains"), "{r}");
        }
    }

    #[test]
    fn an_admin_named_by_sub_is_that_account_whatever_its_email() {
        let p = SignInPolicy {
            allowed_domains: list(&["example.com"]),
            admins: list(&["sub:acct-1", "sub:"]),
            ..Default::default()
        };
        let mut root = who("root@example.com");
        root.subject = "acct-1".into();
        assert_eq!(p.decide(&root), Ok(Access { is_admin: true }));
        root.email = "moved@elsewhere.net".into();
        assert_eq!(
            p.decide(&root),
            Ok(Access { is_admin: true }),
            "the account, not its address"
        );
        // Another account with root's old address is no admin; `sub` is compared exactly
        // and an empty one names nobody.
        for sub in ["acct-2", "ACCT-1", ""] {
            let mut other = who("root@example.com");
            other.subject = sub.into();
            assert_eq!(p.decide(&other), Ok(Access { is_admin: false }), "{sub:?}");
        }
    }

    #[test]
    fn emails_compare_in_lower_case_and_admins_always_enter() {
        let p = SignInPolicy {
            allowed_domains: list(&["example.com"]),
            allowed_emails: list(&["Bob@Other.org"]),
            admins: list(&[" Root@Elsewhere.net "]),
            allow_any: false,
        };
        assert_eq!(
            p.decide(&who("bob@other.ORG")),
            Ok(Access { is_admin: false })
        );
        assert_eq!(
            p.decide(&who("root@elsewhere.net")),
            Ok(Access { is_admin: true })
        );
        assert_eq!(
            p.decide(&who("alice@example.com")),
            Ok(Access { is_admin: false })
        );
        assert!(p.decide(&who("carol@other.org")).is_err());
        // allow_any does not make anyone an admin.
        let any = SignInPolicy {
            allow_any: true,
            ..p
        };
        assert_eq!(
            any.decide(&who("carol@other.org")),
            Ok(Access { is_admin: false })
        );
        assert_eq!(
            any.decide(&who("ROOT@elsewhere.net")),
            Ok(Access { is_admin: true })
        );
    }
}
