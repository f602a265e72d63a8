//! RFC 3339 formatting of UTC timestamps (through chrono, as the run log does).

use std::time::{SystemTime, UNIX_EPOCH};

/// Format `time` as an RFC 3339 UTC timestamp with second precision,
/// e.g. `2025-03-01T12:34:56Z`. Times before the Unix epoch are formatted as
/// the epoch itself.
pub fn rfc3339_utc(time: SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(time.max(UNIX_EPOCH))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(secs: u64) -> String {
        rfc3339_utc(UNIX_EPOCH + Duration::from_secs(secs))
    }

    #[test]
    fn formats_known_instants() {
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(at(1_709_210_096), "2024-02-29T12:34:56Z");
        assert_eq!(at(1_735_689_599), "2024-12-31T23:59:59Z");
        assert_eq!(at(1_735_689_600), "2025-01-01T00:00:00Z");
        assert_eq!(at(4_107_542_400), "2100-03-01T00:00:00Z");
    }

    #[test]
    fn before_epoch_clamps() {
        assert_eq!(
            rfc3339_utc(UNIX_EPOCH - Duration::from_secs(10)),
            "1970-01-01T00:00:00Z"
        );
    }
}
