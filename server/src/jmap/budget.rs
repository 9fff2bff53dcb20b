//! What one API request may make the server build and do (RFC 8620 §8.5:
//! "a small request may result in a very large response"; issue 13).
//!
//! A request carries a [`RequestBudget`] through its calls:
//!
//! - **Bytes built**: the JSON octets of every resolved result reference
//!   (RFC 8620 §3.7) plus every method response, counted as they are
//!   resolved or produced, against [`Limits::max_size_built`] (four times
//!   `maxSizeRequest`). A `#` reference copies a whole earlier response and
//!   Core/echo returns its arguments, so without this bound a 4 KB request
//!   doubles its data per call. Exceeding it is [`OverBudget`]: the
//!   dispatcher answers the request-level `limit` error (see
//!   [`super::dispatch`] for why that error and when a method-level one).
//! - **Render work**: header field values and properties rendered by
//!   Email/get and Email/parse, against [`Limits::max_render_work`]; see
//!   [`crate::mail::work::WorkMeter`]. Exceeding it is `requestTooLarge`
//!   for the call that would exceed it.

use serde_json::Value;

use super::Limits;

/// The budget of one request; see the module doc.
#[derive(Debug, Clone)]
pub struct RequestBudget {
    /// JSON octets the request may still make the server build.
    bytes_left: u64,
    /// Render work units the request may still spend.
    pub work_left: u64,
    /// Octets of messages the request may still have parsed.
    pub parse_bytes_left: u64,
}

/// The request would make the server build more JSON than
/// [`Limits::max_size_built`] allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverBudget;

impl RequestBudget {
    /// A fresh budget under `limits`.
    pub fn new(limits: &Limits) -> Self {
        Self {
            bytes_left: limits.max_size_built(),
            work_left: limits.max_render_work,
            parse_bytes_left: limits.max_parse_bytes(),
        }
    }

    /// JSON octets still allowed.
    pub fn bytes_left(&self) -> u64 {
        self.bytes_left
    }

    /// Takes `octets` from the byte budget, or fails leaving it unchanged.
    pub fn charge_bytes(&mut self, octets: u64) -> Result<(), OverBudget> {
        self.bytes_left = self.bytes_left.checked_sub(octets).ok_or(OverBudget)?;
        Ok(())
    }

    /// Takes the serialized size of `value` from the byte budget: counted
    /// without allocating, and stopping as soon as it is over.
    pub fn charge_json(&mut self, value: &Value) -> Result<(), OverBudget> {
        let size = json_size_within(value, self.bytes_left).ok_or(OverBudget)?;
        self.charge_bytes(size)
    }
}

/// The serialized (compact) JSON size of `value` in octets if it is at most
/// `limit`, else `None`; stops writing as soon as the limit is passed.
pub fn json_size_within(value: &Value, limit: u64) -> Option<u64> {
    struct Counter {
        written: u64,
        limit: u64,
    }
    impl std::io::Write for Counter {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.written += bytes.len() as u64;
            if self.written > self.limit {
                return Err(std::io::Error::other("over the limit"));
            }
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter { written: 0, limit };
    serde_json::to_writer(&mut counter, value).ok()?;
    Some(counter.written)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn json_sizes_are_the_serialized_length_and_stop_at_the_limit() {
        for value in [
            json!(null),
            json!({"a": [1, 2.5, "é\"\n"], "b": {"c": true}}),
            json!("x".repeat(10_000)),
        ] {
            let length = serde_json::to_vec(&value).unwrap().len() as u64;
            assert_eq!(json_size_within(&value, length), Some(length));
            assert_eq!(json_size_within(&value, length - 1), None);
        }
    }

    #[test]
    fn the_byte_budget_refuses_what_does_not_fit_and_keeps_what_is_left() {
        let limits = Limits {
            max_size_request: 100,
            ..Limits::default()
        };
        let mut budget = RequestBudget::new(&limits);
        assert_eq!(budget.bytes_left(), limits.max_size_built());
        budget.charge_json(&json!("x".repeat(298))).unwrap();
        assert_eq!(budget.bytes_left(), 100);
        assert_eq!(budget.charge_json(&json!("y".repeat(99))), Err(OverBudget));
        assert_eq!(budget.bytes_left(), 100);
        budget.charge_bytes(100).unwrap();
        assert_eq!(budget.charge_bytes(1), Err(OverBudget));
    }
}
