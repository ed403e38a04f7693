//! Which binary sessions an event from the engine stage goes to (docs/architecture.md): a
//! reply to its session, a user's fills and cancellations to every session logged in as that
//! user, a public event to every logged-in session in id order. A pure piece with no socket:
//! the gateway (server/src/gateway.rs) and the simulator (crates/sim) both route through it.
//!
//! It keeps its indexes as sessions log in and close, so that routing one event allocates
//! nothing and sorts nothing.

use rustc_hash::FxHashMap;

use rialto_core::UserId;

use crate::event::Target;
use crate::pipeline::SessionId;
use crate::session::Role;

/// Where one event goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route<'a> {
    /// A reply to one session's request (which may have closed since: then it goes nowhere).
    Reply(SessionId),
    /// A user's or a public event: these sessions, in id order.
    Sessions(&'a [SessionId]),
}

/// The logged-in binary sessions, by id and by user.
#[derive(Default)]
pub struct Router {
    /// Every logged-in session (traders and operators), in id order.
    logged_in: Vec<SessionId>,
    /// Keys no client picks (the gateway numbers sessions; the admin creates users), so a
    /// fast unkeyed hash is safe.
    by_user: FxHashMap<UserId, Vec<SessionId>>,
}

impl Router {
    pub fn new() -> Router {
        Router::default()
    }

    /// A session logged in with `role`.
    pub fn logged_in(&mut self, id: SessionId, role: Role) {
        if let Err(at) = self.logged_in.binary_search(&id) {
            self.logged_in.insert(at, id);
        }
        if let Role::Trader(user) = role {
            let ids = self.by_user.entry(user).or_default();
            if let Err(at) = ids.binary_search(&id) {
                ids.insert(at, id);
            }
        }
    }

    /// A session closed (logged in or not): nothing is routed to it any more.
    pub fn closed(&mut self, id: SessionId, role: Role) {
        if let Ok(at) = self.logged_in.binary_search(&id) {
            self.logged_in.remove(at);
        }
        if let Role::Trader(user) = role
            && let Some(ids) = self.by_user.get_mut(&user)
        {
            ids.retain(|&x| x != id);
            if ids.is_empty() {
                self.by_user.remove(&user);
            }
        }
    }

    /// Where an event for `target` goes among the binary sessions (`WebStatus`: none).
    pub fn route(&self, target: Target) -> Route<'_> {
        match target {
            Target::Session(id) => Route::Reply(id),
            Target::User(user) => {
                Route::Sessions(self.by_user.get(&user).map_or(&[][..], Vec::as_slice))
            }
            Target::Public => Route::Sessions(&self.logged_in),
            Target::WebStatus => Route::Sessions(&[]),
        }
    }

    /// Logged-in sessions.
    pub fn len(&self) -> usize {
        self.logged_in.len()
    }

    pub fn is_empty(&self) -> bool {
        self.logged_in.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_users_and_public_events_reach_the_right_sessions_in_id_order() {
        let mut router = Router::new();
        router.logged_in(20, Role::Trader(7));
        router.logged_in(17, Role::Trader(7));
        router.logged_in(18, Role::Admin);
        router.logged_in(19, Role::Trader(8));
        assert_eq!(router.route(Target::Session(99)), Route::Reply(99));
        assert_eq!(router.route(Target::User(7)), Route::Sessions(&[17, 20]));
        assert_eq!(router.route(Target::User(9)), Route::Sessions(&[]));
        assert_eq!(
            router.route(Target::Public),
            Route::Sessions(&[17, 18, 19, 20])
        );
        assert_eq!(router.route(Target::WebStatus), Route::Sessions(&[]));
        router.closed(17, Role::Trader(7));
        router.closed(19, Role::Trader(8));
        assert_eq!(router.route(Target::User(7)), Route::Sessions(&[20]));
        assert_eq!(router.route(Target::User(8)), Route::Sessions(&[]));
        assert_eq!(router.route(Target::Public), Route::Sessions(&[18, 20]));
        assert_eq!(router.len(), 2);
        // A session that never logged in is unknown to it.
        router.closed(30, Role::AwaitingLogin);
        assert_eq!(router.len(), 2);
    }
}
