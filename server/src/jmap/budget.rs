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
//!   doubles its data per call. Exceeding it is [`OverBudget::Request`]: the
//!   dispatcher answers the request-level `limit` error (see
//!   [`super::dispatch`] for why that error and when a method-level one).
//! - **Render work**: header field values and properties rendered by
//!   Email/get and Email/parse, against [`Limits::max_render_work`]; see
//!   [`crate::mail::work::WorkMeter`]. Exceeding it is `requestTooLarge`
//!   for the call that would exceed it. Email/query and
//!   Email/queryChanges spend it too: each text filter condition evaluated
//!   on an email ([`crate::mail::query`] gives the units).
//! - **Full-text conditions**: queries of the full-text index the request's
//!   Email/query and Email/queryChanges calls run, at most
//!   [`crate::mail::search::MAX_TEXT_CONDITIONS`] in all (issue 43),
//!   charged before a call runs any; over it is `requestTooLarge` for that
//!   call.
//! - **Octets parsed**: messages read and parsed whole (Email/get at the
//!   full level, Email/parse), against [`Limits::max_parse_bytes`], charged
//!   from their stored sizes before a blob is read.
//!
//! Beside its own budget, every request of a serving instance takes what it
//! holds from [`Holdings`]: the JSON it built (until the request ends) and the
//! messages it parses (until the call ends), at most
//! [`Limits::max_held_per_account`] for all requests of one account in
//! flight and [`Limits::max_held_per_node`] for all of them. Each request's
//! own budget bounds one request; this bounds how many may hold it at once, so
//! one account's concurrent heavy requests cannot fill the server's memory.
//! A charge the holdings refuse is [`OverBudget::Server`]: the call gets
//! `serverUnavailable` (RFC 8620 §3.6.2: "some internal server resource was
//! temporarily unavailable"), which a retry after the other requests end
//! passes.

use rustc_hash::FxHashMap;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;

use super::Limits;
use super::error::MethodError;

/// The budget of one request; see the module doc.
#[derive(Debug)]
pub struct RequestBudget {
    /// JSON octets the request may still make the server build.
    bytes_left: u64,
    /// Render work units the request may still spend.
    pub work_left: u64,
    /// Octets of messages the request may still have parsed.
    parse_bytes_left: u64,
    /// Queries of the full-text index the request may still run.
    searches_left: usize,
    /// Its share of the server's [`Holdings`], when it has one.
    hold: Option<Hold>,
}

/// Why a charge was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverBudget {
    /// The request's own budget ([`Limits::max_size_built`] or
    /// [`Limits::max_parse_bytes`]) is spent.
    Request,
    /// The account's or the server's requests in flight hold as much as
    /// [`Holdings`] allows: `serverUnavailable`, a retry may pass.
    Server,
}

impl RequestBudget {
    /// A fresh budget under `limits`, holding nothing of any server's
    /// [`Holdings`] (for a request outside a serving instance, and tests).
    pub fn new(limits: &Limits) -> Self {
        Self {
            bytes_left: limits.max_size_built(),
            work_left: limits.max_render_work,
            parse_bytes_left: limits.max_parse_bytes(),
            searches_left: crate::mail::search::MAX_TEXT_CONDITIONS,
            hold: None,
        }
    }

    /// A fresh budget under `limits` for a request of `account` that takes
    /// what it holds from `holdings` and gives it back when dropped.
    pub fn held(limits: &Limits, holdings: &Arc<Holdings>, account: i64) -> Self {
        Self {
            hold: Some(Hold {
                holder: Holder {
                    holdings: holdings.clone(),
                    account,
                },
                request: 0,
                call: 0,
                prepaid: 0,
            }),
            ..Self::new(limits)
        }
    }

    /// JSON octets still allowed.
    pub fn bytes_left(&self) -> u64 {
        self.bytes_left
    }

    /// What a render on another thread takes its JSON from as it builds
    /// it: a [`Taken`] on the request's share of the holdings (taking
    /// nothing without one). What it took is handed to the request with
    /// [`RequestBudget::prepaid`], or given back when it is dropped (the
    /// render failed, panicked, or its request is gone).
    pub fn taker(&self) -> Taken {
        Taken {
            holder: self.hold.as_ref().map(|hold| hold.holder.clone()),
            octets: 0,
        }
    }

    /// Hands the octets a [`Taken`] of this request took for the response
    /// being built to the request: charging that response takes only the
    /// rest, and the request gives them back when it ends.
    pub fn prepaid(&mut self, mut taken: Taken) {
        let octets = std::mem::take(&mut taken.octets);
        match &mut self.hold {
            Some(hold) => {
                hold.request += octets;
                hold.prepaid += octets;
            }
            // Not ours to keep: give them back.
            None => taken.octets = octets,
        }
    }

    /// Takes `octets` from the byte budget and holds them until the request
    /// ends, or fails leaving both unchanged.
    pub fn charge_bytes(&mut self, octets: u64) -> Result<(), OverBudget> {
        let left = left_after(self.bytes_left, octets)?;
        if let Some(hold) = &mut self.hold {
            let owed = octets.saturating_sub(std::mem::take(&mut hold.prepaid));
            hold.request += hold.holder.take_or_refuse(owed)?;
        }
        self.bytes_left = left;
        Ok(())
    }

    /// Takes the serialized size of `value` from the byte budget: counted
    /// without allocating, and stopping as soon as it is over.
    pub fn charge_json(&mut self, value: &Value) -> Result<(), OverBudget> {
        let size = json_size_within(value, self.bytes_left).ok_or(OverBudget::Request)?;
        self.charge_bytes(size)
    }

    /// Takes `octets` of messages about to be read and parsed whole from the
    /// parse budget and holds them until [`RequestBudget::end_call`], or
    /// fails leaving both unchanged. Charged before the messages are read.
    pub fn charge_parse(&mut self, octets: u64) -> Result<(), OverBudget> {
        let left = left_after(self.parse_bytes_left, octets)?;
        if let Some(hold) = &mut self.hold {
            hold.call += hold.holder.take_or_refuse(octets)?;
        }
        self.parse_bytes_left = left;
        Ok(())
    }

    /// [`RequestBudget::charge_parse`] for a method call: over the request's
    /// parse budget is `requestTooLarge` saying so, over the holdings
    /// [`server_busy`].
    pub fn charge_parse_or_refuse(
        &mut self,
        octets: u64,
        limits: &Limits,
    ) -> Result<(), MethodError> {
        self.charge_parse(octets).map_err(|over| match over {
            OverBudget::Request => MethodError::OverBudget(format!(
                "parsing these messages would pass the request's {} octets of messages \
                 parsed; ask for fewer at once",
                limits.max_parse_bytes()
            )),
            OverBudget::Server => server_busy(),
        })
    }

    /// Takes `searches` queries of the full-text index about to be run
    /// from the request's [`crate::mail::search::MAX_TEXT_CONDITIONS`], or
    /// fails leaving them unchanged with `requestTooLarge` saying so.
    pub fn charge_searches(&mut self, searches: usize) -> Result<(), MethodError> {
        self.searches_left = self.searches_left.checked_sub(searches).ok_or_else(|| {
            MethodError::OverBudget(format!(
                "this call's full-text conditions would pass the request's {} \
                 (text and body conditions over all its queries); send it in \
                 another request",
                crate::mail::search::MAX_TEXT_CONDITIONS
            ))
        })?;
        Ok(())
    }

    /// Queries of the full-text index the request may still run.
    pub fn searches_left(&self) -> usize {
        self.searches_left
    }

    /// A call ended: the messages it parsed are no longer held.
    pub fn end_call(&mut self) {
        if let Some(hold) = &mut self.hold {
            hold.holder.give(std::mem::take(&mut hold.call));
            // A prepaid render whose response was not charged (the call
            // failed): its octets stay held with the request's.
            hold.prepaid = 0;
        }
    }
}

/// `serverUnavailable` for a call the server's [`Holdings`]
/// have no room for now: this account's (or every account's) requests in
/// flight hold as much as they may.
pub fn server_busy() -> MethodError {
    MethodError::ServerUnavailable(
        "the requests in flight hold as much memory as the server gives them; \
         retry when they have ended"
            .into(),
    )
}

/// What one request holds of its server's [`Holdings`]; given back on drop.
#[derive(Debug)]
struct Hold {
    holder: Holder,
    /// JSON octets held until the request ends.
    request: u64,
    /// Message octets held until the call ends.
    call: u64,
    /// Octets a [`Holder`] took for the response being built, not yet charged.
    prepaid: u64,
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.holder.give(self.request + self.call);
    }
}

/// Octets a render took from its request's share of the [`Holdings`] as it
/// built a response (`Send`): given back when dropped, unless handed to the
/// request with [`RequestBudget::prepaid`]. So a render whose request was
/// dropped mid-way (the client hung up) or that panicked leaks nothing.
#[derive(Debug)]
pub struct Taken {
    holder: Option<Holder>,
    octets: u64,
}

impl Taken {
    /// Takes `octets` more, or nothing if a cap would pass (`false`).
    pub fn take(&mut self, octets: u64) -> bool {
        let Some(holder) = &self.holder else {
            return true;
        };
        let taken = holder.take(octets);
        if taken {
            self.octets += octets;
        }
        taken
    }

    /// Octets taken so far.
    pub fn octets(&self) -> u64 {
        self.octets
    }
}

impl Drop for Taken {
    fn drop(&mut self) {
        if let Some(holder) = &self.holder {
            holder.give(self.octets);
        }
    }
}

/// What a request's budget `left` leaves after `octets` more, or
/// [`OverBudget::Request`] when it has not that many.
fn left_after(left: u64, octets: u64) -> Result<u64, OverBudget> {
    left.checked_sub(octets).ok_or(OverBudget::Request)
}

/// A request's handle on the [`Holdings`] of its account (`Send`, cheap to clone).
#[derive(Debug, Clone)]
pub struct Holder {
    holdings: Arc<Holdings>,
    account: i64,
}

impl Holder {
    /// The handle of `account` on `holdings`: for what a request holds
    /// outside a JMAP call (a download's octets, issue 43).
    pub fn new(holdings: Arc<Holdings>, account: i64) -> Self {
        Self { holdings, account }
    }

    /// Nothing taken yet; what [`Taken::take`] takes is given back on drop.
    pub fn taken(&self) -> Taken {
        Taken {
            holder: Some(self.clone()),
            octets: 0,
        }
    }

    /// Takes `octets` for the account, or nothing if either cap would pass.
    pub fn take(&self, octets: u64) -> bool {
        self.holdings.take(self.account, octets)
    }

    /// [`Holder::take`] for a charge: the octets taken, or
    /// [`OverBudget::Server`].
    fn take_or_refuse(&self, octets: u64) -> Result<u64, OverBudget> {
        if self.take(octets) {
            Ok(octets)
        } else {
            Err(OverBudget::Server)
        }
    }

    /// Gives back `octets` taken before.
    pub fn give(&self, octets: u64) {
        self.holdings.give(self.account, octets)
    }
}

/// What the requests in flight of one serving instance hold, in octets (JSON
/// built, messages being parsed), per account and in all; see the module doc.
#[derive(Debug)]
pub struct Holdings {
    per_account: u64,
    per_node: u64,
    held: Mutex<Held>,
}

#[derive(Debug, Default)]
struct Held {
    node: u64,
    /// Keyed by account id, the server's own numbers: hashed with Fx, not
    /// SipHash (three lookups a call, ADR 0003, session 23).
    accounts: FxHashMap<i64, u64>,
}

impl Holdings {
    /// Holdings of at most `per_account` octets per account and `per_node`
    /// in all (from [`Limits::max_held_per_account`] and
    /// [`Limits::max_held_per_node`]).
    pub fn new(per_account: u64, per_node: u64) -> Self {
        Self {
            per_account,
            per_node,
            held: Mutex::new(Held::default()),
        }
    }

    /// Octets held now by the requests of `account`, and by all.
    pub fn held(&self, account: i64) -> (u64, u64) {
        let held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        (held.accounts.get(&account).copied().unwrap_or(0), held.node)
    }

    fn take(&self, account: i64, octets: u64) -> bool {
        if octets == 0 {
            return true;
        }
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let mine = held.accounts.get(&account).copied().unwrap_or(0);
        let fits = mine
            .checked_add(octets)
            .is_some_and(|total| total <= self.per_account)
            && held
                .node
                .checked_add(octets)
                .is_some_and(|total| total <= self.per_node);
        if fits {
            held.node += octets;
            *held.accounts.entry(account).or_insert(0) += octets;
        }
        fits
    }

    fn give(&self, account: i64, octets: u64) {
        if octets == 0 {
            return;
        }
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        held.node = held.node.saturating_sub(octets);
        if let Some(mine) = held.accounts.get_mut(&account) {
            *mine = mine.saturating_sub(octets);
            if *mine == 0 {
                held.accounts.remove(&account);
            }
        }
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
        assert_eq!(
            budget.charge_json(&json!("y".repeat(99))),
            Err(OverBudget::Request)
        );
        assert_eq!(budget.bytes_left(), 100);
        budget.charge_bytes(100).unwrap();
        assert_eq!(budget.charge_bytes(1), Err(OverBudget::Request));
    }

    #[test]
    fn holdings_bound_each_account_and_all_and_are_given_back() {
        let limits = Limits::default();
        let holdings = Arc::new(Holdings::new(1_000, 1_500));
        let mut ann = RequestBudget::held(&limits, &holdings, 1);
        ann.charge_bytes(600).unwrap();
        ann.charge_parse(300).unwrap();
        assert_eq!(holdings.held(1), (900, 900));
        // Over ann's share: refused, nothing taken, her request budget kept.
        let left = ann.bytes_left();
        assert_eq!(ann.charge_bytes(101), Err(OverBudget::Server));
        assert_eq!(ann.bytes_left(), left);
        assert_eq!(holdings.held(1), (900, 900));
        // Another account has its own share, under the node's.
        let mut bob = RequestBudget::held(&limits, &holdings, 2);
        bob.charge_bytes(600).unwrap();
        assert_eq!(bob.charge_bytes(1), Err(OverBudget::Server), "node full");
        // The end of a call gives back the messages it parsed.
        ann.end_call();
        assert_eq!(holdings.held(1), (600, 1_200));
        // A render that took octets itself: the response is charged the rest.
        let mut taken = ann.taker();
        assert!(taken.take(250));
        ann.prepaid(taken);
        ann.charge_bytes(300).unwrap();
        assert_eq!(holdings.held(1), (900, 1_500));
        drop(bob);
        // A render whose request is gone gives back what it took.
        let mut orphan = ann.taker();
        assert!(orphan.take(100));
        assert_eq!(holdings.held(1), (1_000, 1_000));
        drop(orphan);
        assert_eq!(holdings.held(1), (900, 900));
        drop(ann);
        assert_eq!(holdings.held(1), (0, 0));
        assert_eq!(holdings.held(2), (0, 0));
    }
}
