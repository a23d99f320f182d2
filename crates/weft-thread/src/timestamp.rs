//! ISO 8601 date-times: parsing for validation and ordering, formatting for receipt times.
//!
//! Accepted form (ISO 8601 extended format, the RFC 3339 profile plus the ISO relaxations that
//! occur in practice): `YYYY-MM-DDThh:mm[:ss[.fraction]][Z|±hh[:mm]|±hhmm]`; `t`/`z` may be
//! lowercase. A date-time without an offset is local time by ISO 8601; for ordering it is taken
//! as UTC. Leap seconds (`:60`) are accepted and ordered as `:59.999999999`.

use std::fmt;

/// A parsed ISO 8601 date-time, comparable across offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp {
    /// Nanoseconds since 1970-01-01T00:00:00Z.
    unix_nanos: i128,
}

/// Why a string is not an ISO 8601 date-time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not an ISO 8601 date-time: {reason}")]
pub struct TimestampError {
    reason: &'static str,
}

fn fail<T>(reason: &'static str) -> Result<T, TimestampError> {
    Err(TimestampError { reason })
}

struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn digits(&mut self, count: usize) -> Result<i64, TimestampError> {
        let mut value = 0i64;
        for _ in 0..count {
            match self.bytes.get(self.at) {
                Some(byte @ b'0'..=b'9') => value = value * 10 + i64::from(byte - b'0'),
                _ => return fail("expected a digit"),
            }
            self.at += 1;
        }
        Ok(value)
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn eat(&mut self, byte: u8) -> bool {
        if self.peek() == Some(byte) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, byte: u8, reason: &'static str) -> Result<(), TimestampError> {
        if self.eat(byte) { Ok(()) } else { fail(reason) }
    }
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to the given civil date (proleptic Gregorian).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_index = (month + 9) % 12;
    let day_of_year = (153 * month_index + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let days = days + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

impl Timestamp {
    /// Parses an ISO 8601 date-time (see the module docs for the accepted form).
    ///
    /// # Errors
    ///
    /// [`TimestampError`] when the text is not such a date-time or a field is out of range.
    pub fn parse(text: &str) -> Result<Self, TimestampError> {
        let mut cursor = Cursor {
            bytes: text.as_bytes(),
            at: 0,
        };
        let year = cursor.digits(4)?;
        cursor.expect(b'-', "expected `-` after the year")?;
        let month = cursor.digits(2)?;
        cursor.expect(b'-', "expected `-` after the month")?;
        let day = cursor.digits(2)?;
        if !(1..=12).contains(&month) {
            return fail("month out of range");
        }
        if day < 1 || day > days_in_month(year, month) {
            return fail("day out of range");
        }
        if !(cursor.eat(b'T') || cursor.eat(b't')) {
            return fail("expected `T` between date and time");
        }
        let hour = cursor.digits(2)?;
        cursor.expect(b':', "expected `:` after the hour")?;
        let minute = cursor.digits(2)?;
        let mut second = 0;
        let mut nanos: i64 = 0;
        if cursor.eat(b':') {
            second = cursor.digits(2)?;
            if cursor.eat(b'.') || cursor.eat(b',') {
                let mut count = 0;
                while let Some(byte @ b'0'..=b'9') = cursor.peek() {
                    if count < 9 {
                        nanos = nanos * 10 + i64::from(byte - b'0');
                    }
                    count += 1;
                    cursor.at += 1;
                }
                if count == 0 {
                    return fail("expected digits after the decimal mark");
                }
                for _ in count..9 {
                    nanos *= 10;
                }
            }
        }
        if hour > 23 || minute > 59 || second > 60 {
            return fail("time out of range");
        }
        if second == 60 {
            second = 59;
            nanos = 999_999_999;
        }
        let offset_seconds = match cursor.peek() {
            None => 0,
            Some(b'Z' | b'z') => {
                cursor.at += 1;
                0
            }
            Some(sign @ (b'+' | b'-')) => {
                cursor.at += 1;
                let hours = cursor.digits(2)?;
                let minutes = if cursor.peek().is_some() {
                    cursor.eat(b':');
                    cursor.digits(2)?
                } else {
                    0
                };
                if hours > 23 || minutes > 59 {
                    return fail("offset out of range");
                }
                let seconds = hours * 3600 + minutes * 60;
                if sign == b'+' { seconds } else { -seconds }
            }
            Some(_) => return fail("unexpected character after the time"),
        };
        if cursor.at != text.len() {
            return fail("unexpected trailing characters");
        }
        let seconds =
            days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second
                - offset_seconds;
        Ok(Self {
            unix_nanos: i128::from(seconds) * 1_000_000_000 + i128::from(nanos),
        })
    }

    /// The instant `nanos` nanoseconds after the Unix epoch.
    pub fn from_unix_nanos(nanos: i128) -> Self {
        Self { unix_nanos: nanos }
    }

    /// Nanoseconds since the Unix epoch.
    pub fn unix_nanos(self) -> i128 {
        self.unix_nanos
    }
}

/// Formats as UTC with millisecond precision, like JavaScript's `toISOString`:
/// `2025-01-20T10:00:00.000Z`.
impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let total_millis = self.unix_nanos.div_euclid(1_000_000);
        let millis = total_millis.rem_euclid(1000);
        let seconds = total_millis.div_euclid(1000);
        let days = i64::try_from(seconds.div_euclid(86_400)).unwrap_or(0);
        let in_day = seconds.rem_euclid(86_400);
        let (year, month, day) = civil_from_days(days);
        write!(
            f,
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
            in_day / 3600,
            in_day / 60 % 60,
            in_day % 60
        )
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn parses_and_orders_across_offsets() {
        let utc = Timestamp::parse("2025-01-20T10:00:00Z").unwrap();
        let plus = Timestamp::parse("2025-01-20T11:00:00+01:00").unwrap();
        assert_eq!(utc, plus);
        assert!(Timestamp::parse("2025-01-20T10:00:00.5Z").unwrap() > utc);
        assert_eq!(utc.to_string(), "2025-01-20T10:00:00.000Z");
        assert_eq!(
            Timestamp::parse("1969-12-31T23:59:59.999Z")
                .unwrap()
                .to_string(),
            "1969-12-31T23:59:59.999Z"
        );
    }

    #[test]
    fn rejects_bad_values() {
        for bad in [
            "",
            "2025-13-01T00:00:00Z",
            "2025-02-29T00:00:00Z",
            "2025-01-01",
            "2025-01-01T24:00Z",
            "2025-01-01T00:00:00Zjunk",
            "2025-01-01T00:00:00.Z",
            "yesterday",
        ] {
            assert!(Timestamp::parse(bad).is_err(), "{bad}");
        }
        assert!(Timestamp::parse("2024-02-29T00:00Z").is_ok());
        assert!(Timestamp::parse("2025-01-01T00:00:00+0530").is_ok());
    }
}
