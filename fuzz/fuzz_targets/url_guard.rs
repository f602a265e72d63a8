//! URLs reach the guard from settings, servers (redirects, OAuth metadata, resource
//! links), the model and workflows: parsing and classification must never panic, and a
//! URL the guard accepts must name a host it classified.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchboard_net::{ALL_POLICIES, check_url};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for policy in ALL_POLICIES {
        if let Ok(guarded) = check_url(text, policy) {
            // Whatever passed has a scheme the policy allows.
            assert!(policy.allows_scheme(guarded.url().scheme()), "{text}");
        }
    }
});
