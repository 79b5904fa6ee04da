//! Times of day as RMM's log writes them: `HH:MM:SS.micro`.

/// Microseconds in an hour.
const HOUR_US: u64 = 3_600_000_000;
/// Microseconds in a day.
pub(crate) const DAY_US: u64 = 24 * HOUR_US;

/// Parse `HH:MM:SS[.fraction]` into microseconds. Hours may exceed 23 (a trace
/// written past midnight of its first day); the fraction may have 1 to 9 digits
/// (digits past the sixth are dropped).
pub(crate) fn parse_time(s: &str) -> Result<u64, String> {
    let bad = |why: &str| format!("bad time '{}': {why}", crate::rmm::shown(s));
    let mut parts = s.splitn(3, ':');
    let (Some(h), Some(m), Some(rest)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(bad("expected HH:MM:SS.micro"));
    };
    let (sec, frac) = rest.split_once('.').unwrap_or((rest, ""));
    let digits = |f: &str, max: usize| -> Option<u64> {
        if f.is_empty() || f.len() > max || !f.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        f.parse().ok()
    };
    let h = digits(h, 12).ok_or_else(|| bad("hours are not a number"))?;
    let m = digits(m, 2)
        .filter(|&m| m < 60)
        .ok_or_else(|| bad("minutes must be 00 to 59"))?;
    let sec = digits(sec, 2)
        .filter(|&v| v < 60)
        .ok_or_else(|| bad("seconds must be 00 to 59"))?;
    let micro = if rest.contains('.') {
        let f = digits(frac, 9).ok_or_else(|| bad("the fraction must be 1 to 9 digits"))?;
        // Scale to exactly six digits: drop digits past microseconds, pad short ones.
        let len = frac.len() as u32;
        if len >= 6 {
            f / 10u64.pow(len - 6)
        } else {
            f * 10u64.pow(6 - len)
        }
    } else {
        0
    };
    // Hours may have up to 12 digits: a time past what a u64 of microseconds holds
    // is malformed input, not a crash.
    h.checked_mul(HOUR_US)
        .and_then(|v| v.checked_add((m * 60 + sec) * 1_000_000 + micro))
        .ok_or_else(|| bad("the time is too large"))
}

/// Write microseconds as `HH:MM:SS.micro` (hours keep counting past 23, so a trace
/// longer than a day reads back unchanged).
pub(crate) fn format_time(us: u64, out: &mut impl std::fmt::Write) -> std::fmt::Result {
    let h = us / HOUR_US;
    let m = us / 60_000_000 % 60;
    let s = us / 1_000_000 % 60;
    write!(out, "{h:02}:{m:02}:{s:02}.{:06}", us % 1_000_000)
}

/// Microseconds since midnight, shown as [`format_time`] writes them.
pub(crate) struct ClockTime(pub(crate) u64);

impl std::fmt::Display for ClockTime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        format_time(self.0, f)
    }
}

/// Turns times of day into a clock that keeps growing past midnight: a time more
/// than twelve hours before the previous one is taken to be on the next day.
#[derive(Debug, Default)]
pub(crate) struct Unwrapper {
    prev: u64,
    offset: u64,
}

impl Unwrapper {
    /// The unwrapped time of `raw`.
    pub(crate) fn unwrap(&mut self, raw: u64) -> u64 {
        if raw.saturating_add(DAY_US / 2) < self.prev {
            self.offset = self.offset.saturating_add(DAY_US);
        }
        self.prev = raw;
        raw.saturating_add(self.offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_hours_are_an_error_not_an_overflow() {
        // Found by fuzzing the RMM CSV reader.
        assert!(parse_time("7942967295:0:1").is_err());
        assert!(parse_time("999999999999:59:59.999999").is_err());
        let mut u = Unwrapper::default();
        assert_eq!(u.unwrap(u64::MAX - 1), u64::MAX - 1);
        assert!(
            u.unwrap(0) >= DAY_US,
            "a wrap past midnight still counts a day"
        );
    }

    #[test]
    fn parses_and_formats() {
        let t = parse_time("12:09:01.393955").unwrap();
        assert_eq!(t, ((12 * 60 + 9) * 60 + 1) * 1_000_000 + 393_955);
        let mut s = String::new();
        format_time(t, &mut s).unwrap();
        assert_eq!(s, "12:09:01.393955");
        assert_eq!(parse_time("00:00:01.5").unwrap(), 1_500_000);
        assert_eq!(parse_time("00:00:01.123456789").unwrap(), 1_123_456);
        assert_eq!(parse_time("00:00:02").unwrap(), 2_000_000);
        for bad in [
            "",
            "12:09",
            "1a:00:00.0",
            "00:60:00.0",
            "00:00:60.0",
            "00:00:00.",
            "00:00:00.x",
            "00:00:00.1234567890",
        ] {
            assert!(parse_time(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn unwraps_midnight() {
        let mut u = Unwrapper::default();
        let late = parse_time("23:59:59.000000").unwrap();
        assert_eq!(u.unwrap(late), late);
        assert_eq!(u.unwrap(5), DAY_US + 5);
        assert_eq!(u.unwrap(7), DAY_US + 7);
    }
}
