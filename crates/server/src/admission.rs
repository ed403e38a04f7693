//! What every listener does the same way for peers that have not authenticated yet
//! (docs/security.md): a small budget of connections waiting to log in, and a throttle on
//! failed logins. Nothing here reads a clock; callers pass `Instant`s, so tests drive time.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::Hash;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rialto_core::UserId;
use rialto_wire::ErrorCode;

use crate::auth::{Credentials, constant_time_eq};
use crate::session::Role;

/// The unit of "one client" for per-address limits: an IPv4 address, or the /64 network of
/// an IPv6 one (one host is usually given a whole /64).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PeerKey(u128);

impl PeerKey {
    pub fn of(addr: IpAddr) -> PeerKey {
        match addr {
            IpAddr::V4(v4) => PeerKey(u128::from(u32::from(v4))),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => PeerKey(u128::from(u32::from(v4))),
                None => PeerKey((u128::from(v6) >> 64 << 64) | 1 << 32),
            },
        }
    }
}

/// The connections of one listener that have not authenticated. At most `max` of them, at
/// most `per_peer` from one [`PeerKey`]; a new connection over either limit evicts the
/// oldest one (of its own peer when that is the limit reached). So idle sockets cannot keep
/// a real login out: the newest connection always gets its login deadline to log in, and an
/// attacker's sockets only push out each other (and, at worst, logins older than the
/// `max` newest connections).
pub struct PreAuthBudget<Id: Copy + Ord> {
    max: usize,
    per_peer: usize,
    /// By arrival (ids are handed out in increasing order).
    waiting: BTreeMap<Id, PeerKey>,
    by_peer: HashMap<PeerKey, BTreeSet<Id>>,
}

impl<Id: Copy + Ord> PreAuthBudget<Id> {
    pub fn new(max: usize, per_peer: usize) -> PreAuthBudget<Id> {
        assert!(
            max >= 1 && per_peer >= 1,
            "a budget admits at least one connection"
        );
        PreAuthBudget {
            max,
            per_peer,
            waiting: BTreeMap::new(),
            by_peer: HashMap::new(),
        }
    }

    /// A new connection `id` (greater than every id admitted before) from `peer`. Returns
    /// the connection to close to make room for it, if any.
    pub fn admit(&mut self, id: Id, peer: PeerKey) -> Option<Id> {
        debug_assert!(
            self.waiting
                .keys()
                .next_back()
                .is_none_or(|&last| last < id)
        );
        let same_peer = self.by_peer.get(&peer).map_or(0, BTreeSet::len);
        let evict = if same_peer >= self.per_peer {
            self.by_peer[&peer].first().copied()
        } else if self.waiting.len() >= self.max {
            self.waiting.keys().next().copied()
        } else {
            None
        };
        if let Some(old) = evict {
            self.leave(old);
        }
        self.waiting.insert(id, peer);
        self.by_peer.entry(peer).or_default().insert(id);
        debug_assert!(self.waiting.len() <= self.max);
        evict
    }

    /// `id` logged in, or closed: it no longer counts.
    pub fn leave(&mut self, id: Id) {
        if let Some(peer) = self.waiting.remove(&id)
            && let Some(ids) = self.by_peer.get_mut(&peer)
        {
            ids.remove(&id);
            if ids.is_empty() {
                self.by_peer.remove(&peer);
            }
        }
    }

    pub fn len(&self) -> usize {
        self.waiting.len()
    }

    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }
}

/// Limits on failed logins.
#[derive(Clone, Copy, Debug)]
pub struct ThrottleSettings {
    /// Failures allowed in a burst, per address and per user.
    pub burst: u32,
    /// Failures forgiven per second once the burst is spent.
    pub per_sec: f64,
}

impl Default for ThrottleSettings {
    fn default() -> Self {
        ThrottleSettings {
            burst: 10,
            per_sec: 1.0,
        }
    }
}

/// Most entries one throttle table keeps (a full one forgets an arbitrary entry).
const MAX_ENTRIES: usize = 65_536;

/// Failed logins, counted per address and per user as buckets of allowed failures. An address
/// that has spent its bucket is refused without its secret being looked at. A user whose
/// bucket is spent is refused only from addresses that failed recently themselves, so that
/// someone guessing one user's secret cannot lock that user out from a clean address.
/// Entries whose bucket is full again are forgotten, so the tables hold only recent failures.
pub struct LoginThrottle<U: Copy + Eq + Hash> {
    settings: ThrottleSettings,
    by_peer: HashMap<PeerKey, Bucket>,
    by_user: HashMap<U, Bucket>,
}

#[derive(Clone, Copy, Debug)]
struct Bucket {
    failures_left: f64,
    at: Instant,
}

impl Bucket {
    fn refilled(self, settings: ThrottleSettings, now: Instant) -> f64 {
        let since = now.saturating_duration_since(self.at).as_secs_f64();
        (self.failures_left + since * settings.per_sec).min(f64::from(settings.burst))
    }
}

/// Why a login attempt was not even looked at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Throttled {
    Address,
    User,
}

impl<U: Copy + Eq + Hash> LoginThrottle<U> {
    pub fn new(settings: ThrottleSettings) -> LoginThrottle<U> {
        LoginThrottle {
            settings,
            by_peer: HashMap::new(),
            by_user: HashMap::new(),
        }
    }

    /// May `peer` try to log in (as `user`, when the attempt names one)?
    pub fn check(&self, peer: PeerKey, user: Option<U>, now: Instant) -> Result<(), Throttled> {
        let Some(own) = self.by_peer.get(&peer) else {
            return Ok(()); // a clean address: never refused
        };
        if own.refilled(self.settings, now) < 1.0 {
            return Err(Throttled::Address);
        }
        match user.and_then(|u| self.by_user.get(&u)) {
            Some(b) if b.refilled(self.settings, now) < 1.0 => Err(Throttled::User),
            _ => Ok(()),
        }
    }

    /// A login from `peer` (as `user`, when it named one) failed.
    pub fn failed(&mut self, peer: PeerKey, user: Option<U>, now: Instant) {
        let settings = self.settings;
        spend(&mut self.by_peer, peer, settings, now);
        if let Some(user) = user {
            spend(&mut self.by_user, user, settings, now);
        }
    }

    /// Forgets entries whose bucket is full again. Call it now and then (every few seconds).
    pub fn prune(&mut self, now: Instant) {
        let settings = self.settings;
        let full = f64::from(settings.burst);
        self.by_peer.retain(|_, b| b.refilled(settings, now) < full);
        self.by_user.retain(|_, b| b.refilled(settings, now) < full);
    }

    /// Entries held (addresses and users).
    pub fn len(&self) -> usize {
        self.by_peer.len() + self.by_user.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn spend<K: Copy + Eq + Hash>(
    table: &mut HashMap<K, Bucket>,
    key: K,
    settings: ThrottleSettings,
    now: Instant,
) {
    if table.len() >= MAX_ENTRIES && !table.contains_key(&key) {
        let full = f64::from(settings.burst);
        table.retain(|_, b| b.refilled(settings, now) < full);
        if table.len() >= MAX_ENTRIES
            && let Some(&any) = table.keys().next()
        {
            table.remove(&any);
        }
    }
    let left = table
        .get(&key)
        .map_or(f64::from(settings.burst), |b| b.refilled(settings, now));
    table.insert(
        key,
        Bucket {
            failures_left: (left - 1.0).max(0.0),
            at: now,
        },
    );
}

/// How often callers should prune throttles.
pub const PRUNE_EVERY: Duration = Duration::from_secs(5);

/// At most one log line per `every` for events a peer can cause at will (refused logins,
/// evicted connections): the others are counted, and the next line says how many there were.
/// So an attacker cannot fill the disk through the server's own log.
pub struct LogLimiter {
    every: Duration,
    last: Option<Instant>,
    suppressed: u64,
}

impl LogLimiter {
    pub fn new(every: Duration) -> LogLimiter {
        LogLimiter {
            every,
            last: None,
            suppressed: 0,
        }
    }

    /// Calls `log(events not logged since the last line)` if a line is due.
    pub fn note(&mut self, now: Instant, log: impl FnOnce(u64)) {
        if self
            .last
            .is_some_and(|last| now.saturating_duration_since(last) < self.every)
        {
            self.suppressed += 1;
            return;
        }
        log(self.suppressed);
        self.suppressed = 0;
        self.last = Some(now);
    }
}

/// How often a [`LogLimiter`] of the server lets a line through.
pub const LOG_EVERY: Duration = Duration::from_secs(10);

/// The binary gateway's login decision (docs/protocol.md, Login): the failed-login throttles,
/// the secret, the port's limit of logged-in sessions. A decision, not I/O: the gateway
/// (server/src/gateway.rs) and the simulator (crates/sim) call it with the attempt, the time
/// and how many sessions are logged in on the port, and act on the answer.
pub struct Logins {
    credentials: Arc<Credentials>,
    admin_secret: String,
    /// Logged-in sessions allowed on the order port and on the admin port.
    max_sessions: usize,
    max_admin_sessions: usize,
    /// Failed logins; admin logins count as user 0.
    throttle: LoginThrottle<UserId>,
}

/// One login frame as the gateway received it.
#[derive(Clone, Copy, Debug)]
pub struct LoginAttempt<'a> {
    pub peer: PeerKey,
    pub admin_port: bool,
    /// 0 on the admin port.
    pub user: UserId,
    pub secret: &'a [u8],
}

/// Why a login was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoginRefused {
    /// Too many failed logins: the secret was not looked at.
    Throttled(Throttled),
    /// A wrong user id or secret (counted against the throttles).
    WrongSecret { admin_port: bool },
    /// The port's limit of logged-in sessions is reached.
    TooManySessions,
}

impl LoginRefused {
    pub fn code(self) -> ErrorCode {
        match self {
            LoginRefused::TooManySessions => ErrorCode::Busy,
            LoginRefused::Throttled(_) | LoginRefused::WrongSecret { .. } => ErrorCode::AuthFailed,
        }
    }

    /// The Error frame's text.
    pub fn message(self) -> &'static str {
        match self {
            LoginRefused::Throttled(Throttled::Address) => {
                "too many failed logins from this address: wait"
            }
            LoginRefused::Throttled(Throttled::User) => {
                "too many failed logins for this user: wait"
            }
            LoginRefused::WrongSecret { admin_port: true } => "wrong admin secret",
            LoginRefused::WrongSecret { admin_port: false } => "wrong user id or secret",
            LoginRefused::TooManySessions => "too many sessions",
        }
    }
}

impl Logins {
    pub fn new(
        credentials: Arc<Credentials>,
        admin_secret: String,
        max_sessions: usize,
        max_admin_sessions: usize,
        throttle: ThrottleSettings,
    ) -> Logins {
        Logins {
            credentials,
            admin_secret,
            max_sessions,
            max_admin_sessions,
            throttle: LoginThrottle::new(throttle),
        }
    }

    /// Decides one login; `logged_in` is how many sessions are logged in on the attempt's port
    /// now. Granted: the session's role. A wrong secret is counted against the throttles.
    pub fn decide(
        &mut self,
        attempt: LoginAttempt<'_>,
        logged_in: usize,
        now: Instant,
    ) -> Result<Role, LoginRefused> {
        let LoginAttempt {
            peer,
            admin_port,
            user,
            secret,
        } = attempt;
        self.throttle
            .check(peer, Some(user), now)
            .map_err(LoginRefused::Throttled)?;
        let granted = if admin_port {
            constant_time_eq(self.admin_secret.as_bytes(), secret)
        } else {
            self.credentials.check_user(user, secret)
        };
        if !granted {
            self.throttle.failed(peer, Some(user), now);
            return Err(LoginRefused::WrongSecret { admin_port });
        }
        let limit = if admin_port {
            self.max_admin_sessions
        } else {
            self.max_sessions
        };
        if logged_in >= limit {
            return Err(LoginRefused::TooManySessions);
        }
        Ok(if admin_port {
            Role::Admin
        } else {
            Role::Trader(user)
        })
    }

    /// Forgets throttle entries whose bucket is full again (every [`PRUNE_EVERY`]).
    pub fn prune(&mut self, now: Instant) {
        self.throttle.prune(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(n: u8) -> PeerKey {
        PeerKey::of(IpAddr::from([10, 0, 0, n]))
    }

    #[test]
    fn a_full_budget_evicts_the_oldest_and_a_greedy_peer_evicts_its_own() {
        let mut budget = PreAuthBudget::new(3, 2);
        assert_eq!(budget.admit(1, peer(1)), None);
        assert_eq!(budget.admit(2, peer(1)), None);
        // Peer 1 is at its cap: its own oldest goes.
        assert_eq!(budget.admit(3, peer(1)), Some(1));
        assert_eq!(budget.admit(4, peer(2)), None);
        // The listener is at its cap: the oldest of all goes.
        assert_eq!(budget.admit(5, peer(3)), Some(2));
        budget.leave(4); // logged in
        assert_eq!(budget.admit(6, peer(4)), None);
        assert_eq!(budget.len(), 3);
        for id in [3, 5, 6] {
            budget.leave(id);
        }
        assert!(budget.is_empty());
    }

    #[test]
    fn ipv6_peers_are_counted_by_their_64_network() {
        let a: IpAddr = "2001:db8::1".parse().unwrap();
        let b: IpAddr = "2001:db8::ffff:2".parse().unwrap();
        let c: IpAddr = "2001:db8:0:1::1".parse().unwrap();
        assert_eq!(PeerKey::of(a), PeerKey::of(b));
        assert_ne!(PeerKey::of(a), PeerKey::of(c));
        let mapped: IpAddr = "::ffff:10.0.0.1".parse().unwrap();
        assert_eq!(PeerKey::of(mapped), peer(1));
    }

    #[test]
    fn failures_throttle_the_address_and_the_user_only_from_failing_addresses() {
        let settings = ThrottleSettings {
            burst: 3,
            per_sec: 1.0,
        };
        let mut throttle = LoginThrottle::<i64>::new(settings);
        let t0 = Instant::now();
        for _ in 0..3 {
            assert_eq!(throttle.check(peer(1), Some(7), t0), Ok(()));
            throttle.failed(peer(1), Some(7), t0);
        }
        assert_eq!(
            throttle.check(peer(1), Some(8), t0),
            Err(Throttled::Address)
        );
        // User 7's bucket is spent too, but a clean address may still log in as 7.
        assert_eq!(throttle.check(peer(2), Some(7), t0), Ok(()));
        throttle.failed(peer(2), Some(9), t0);
        assert_eq!(throttle.check(peer(2), Some(7), t0), Err(Throttled::User));
        // A second later one failure is forgiven.
        let t1 = t0 + Duration::from_millis(1_001);
        assert_eq!(throttle.check(peer(1), Some(8), t1), Ok(()));
        // Three seconds on, every bucket is full again and forgotten.
        throttle.prune(t0 + Duration::from_secs(4));
        assert!(throttle.is_empty());
    }

    #[test]
    fn a_log_limiter_lets_one_line_through_per_interval_and_counts_the_rest() {
        let mut limiter = LogLimiter::new(Duration::from_secs(10));
        let t0 = Instant::now();
        let mut lines = Vec::new();
        for ms in [0, 1, 2, 9_999, 10_000, 10_001] {
            limiter.note(t0 + Duration::from_millis(ms), |n| lines.push((ms, n)));
        }
        assert_eq!(lines, [(0, 0), (10_000, 3)]);
    }
}
