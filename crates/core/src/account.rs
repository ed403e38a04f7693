//! Users' accounts: balances per currency, and the list of each user's open orders.
//!
//! On a big venue an account is read cold by most commands (the taker's, and each maker's a
//! trade settles), so each account is one cache line: the head and length of its order list and
//! three balances, enough for the handful of currencies a spot user holds. A fourth currency's
//! balance and beyond go to an overflow map beside the accounts, off the hot path. The user id of
//! each account is kept in its own array: only a lookup by user id reads it, while the commands
//! that name an order reach the account from the order.

use std::collections::BTreeMap;

use rialto_prefetch::prefetch_index;

use crate::book::NIL;
use crate::types::{CurrencyId, UserId};

/// A balance: what the user can spend, and what their open orders hold.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Amounts {
    pub available: i64,
    pub held: i64,
}

/// Balances kept in the account's own line.
const INLINE_BALANCES: usize = 3;
/// An inline slot no currency uses yet.
const FREE_SLOT: u16 = u16::MAX;
/// How many currencies a venue can have: an inline slot names its currency in 16 bits.
pub(crate) const MAX_CURRENCIES: usize = FREE_SLOT as usize;

#[repr(C, align(64))]
pub(crate) struct Account {
    /// Head of the intrusive list of this account's resting orders.
    pub orders_head: u32,
    pub open_orders: u32,
    /// Suspended by the operator (docs/rules.md, "User suspension"): no new orders, no
    /// withdrawals. In the line's spare byte.
    pub suspended: bool,
    /// May have futures exposure (a position or a futures order, now or before): spot holds
    /// and withdrawals then take the margin check (docs/rules.md, "Futures"). Never cleared;
    /// when the user has no exposure the check passes whenever the funds check does. In the
    /// line's other spare byte.
    pub futures: bool,
    /// The currency of each inline balance, [`FREE_SLOT`] when unused. Slots fill in order and
    /// are never given back, so only an account whose last slot is taken can have balances in
    /// the overflow map.
    currencies: [u16; INLINE_BALANCES],
    amounts: [Amounts; INLINE_BALANCES],
}

const _: () = assert!(std::mem::size_of::<Account>() == 64);

impl Account {
    fn new() -> Self {
        Account {
            orders_head: NIL,
            open_orders: 0,
            suspended: false,
            futures: false,
            currencies: [FREE_SLOT; INLINE_BALANCES],
            amounts: [Amounts::default(); INLINE_BALANCES],
        }
    }

    #[inline(always)]
    fn slot(&self, currency: CurrencyId) -> Option<usize> {
        // Ids are below MAX_CURRENCIES (see `Accounts::balance_mut`), so never FREE_SLOT.
        let code = currency.0 as u16;
        self.currencies.iter().position(|&c| c == code)
    }

    /// Whether some of this account's balances may be in the overflow map.
    #[inline]
    fn may_overflow(&self) -> bool {
        self.currencies[INLINE_BALANCES - 1] != FREE_SLOT
    }
}

/// Every account, addressed by its index (assigned in the order users were added).
pub(crate) struct Accounts {
    accounts: Vec<Account>,
    users: Vec<UserId>,
    /// Balances that found no inline slot: (account, currency) to amounts.
    overflow: BTreeMap<(u32, CurrencyId), Amounts>,
}

impl Accounts {
    pub fn with_capacity(capacity: usize) -> Self {
        Accounts {
            accounts: Vec::with_capacity(capacity),
            users: Vec::with_capacity(capacity),
            overflow: BTreeMap::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.accounts.len()
    }

    /// Bytes each account takes in the hot array.
    pub const fn bytes_each() -> usize {
        std::mem::size_of::<Account>()
    }

    /// Adds an account for `user`, with no balance and no order; returns its index.
    pub fn push(&mut self, user: UserId) -> u32 {
        let index = self.accounts.len() as u32;
        self.accounts.push(Account::new());
        self.users.push(user);
        index
    }

    #[inline]
    pub fn user(&self, account: u32) -> UserId {
        self.users[account as usize]
    }

    /// Every user id, by account index.
    pub fn users(&self) -> &[UserId] {
        &self.users
    }

    #[inline]
    pub fn get(&self, account: u32) -> &Account {
        &self.accounts[account as usize]
    }

    #[inline]
    pub fn get_mut(&mut self, account: u32) -> &mut Account {
        &mut self.accounts[account as usize]
    }

    /// Starts loading the account's line.
    #[inline]
    pub fn prefetch(&self, account: u32) {
        prefetch_index(&self.accounts, account as usize);
    }

    /// Starts loading the account's line and its user id, which a lookup by user id checks.
    #[inline]
    pub fn prefetch_with_user(&self, account: u32) {
        self.prefetch(account);
        prefetch_index(&self.users, account as usize);
    }

    /// The account's balance in `currency` (zero when never touched).
    #[inline(always)]
    pub fn balance(&self, account: u32, currency: CurrencyId) -> Amounts {
        let a = &self.accounts[account as usize];
        match a.slot(currency) {
            Some(i) => a.amounts[i],
            None if a.may_overflow() => self.overflowed_balance(account, currency),
            None => Amounts::default(),
        }
    }

    #[cold]
    fn overflowed_balance(&self, account: u32, currency: CurrencyId) -> Amounts {
        self.overflow
            .get(&(account, currency))
            .copied()
            .unwrap_or_default()
    }

    /// The account's balance in `currency`, created (zero) on first use. `currency` must be a
    /// registered currency, whose id is below [`MAX_CURRENCIES`].
    #[inline(always)]
    pub fn balance_mut(&mut self, account: u32, currency: CurrencyId) -> &mut Amounts {
        match self.accounts[account as usize].slot(currency) {
            Some(i) => &mut self.accounts[account as usize].amounts[i],
            None => self.new_or_overflowed_balance(account, currency),
        }
    }

    /// A currency not in the account's inline slots (off the hot path): takes a free slot, or
    /// finds or makes its entry in the overflow map.
    #[cold]
    fn new_or_overflowed_balance(&mut self, account: u32, currency: CurrencyId) -> &mut Amounts {
        debug_assert!((currency.0 as usize) < MAX_CURRENCIES);
        let a = &mut self.accounts[account as usize];
        if let Some(i) = a.currencies.iter().position(|&c| c == FREE_SLOT) {
            a.currencies[i] = currency.0 as u16;
            return &mut a.amounts[i];
        }
        self.overflow.entry((account, currency)).or_default()
    }

    /// Every balance entry of one account (zero ones included), in no particular order.
    pub fn balances(&self, account: u32) -> impl Iterator<Item = (CurrencyId, Amounts)> + '_ {
        let a = &self.accounts[account as usize];
        let inline = a
            .currencies
            .iter()
            .zip(&a.amounts)
            .filter(|&(&c, _)| c != FREE_SLOT)
            .map(|(&c, &amounts)| (CurrencyId(c as u32), amounts));
        let overflowed = a
            .may_overflow()
            .then(|| {
                self.overflow
                    .range((account, CurrencyId(0))..=(account, CurrencyId(u32::MAX)))
                    .map(|(&(_, c), &amounts)| (c, amounts))
            })
            .into_iter()
            .flatten();
        inline.chain(overflowed)
    }

    /// Every balance entry of every account: (account, currency, amounts), in no particular
    /// order.
    pub fn all_balances(&self) -> impl Iterator<Item = (u32, CurrencyId, Amounts)> + '_ {
        (0..self.accounts.len() as u32)
            .flat_map(move |account| self.balances(account).map(move |(c, b)| (account, c, b)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn balances_beyond_the_inline_slots_overflow_and_read_back() {
        let mut accounts = Accounts::with_capacity(2);
        let a = accounts.push(7);
        let b = accounts.push(9);
        for c in 0..6 {
            accounts.balance_mut(a, CurrencyId(c)).available += 10 + c as i64;
        }
        accounts.balance_mut(a, CurrencyId(4)).held += 5;
        accounts.balance_mut(b, CurrencyId(5)).available += 1;
        for c in 0..6 {
            let held = if c == 4 { 5 } else { 0 };
            let expected = Amounts {
                available: 10 + c as i64,
                held,
            };
            assert_eq!(accounts.balance(a, CurrencyId(c)), expected, "currency {c}");
        }
        assert_eq!(accounts.balance(a, CurrencyId(6)), Amounts::default());
        let mut listed: Vec<_> = accounts.balances(a).map(|(c, _)| c.0).collect();
        listed.sort_unstable();
        assert_eq!(listed, [0, 1, 2, 3, 4, 5]);
        // The other account's only balance sits inline, not in `a`'s overflow.
        assert_eq!(
            accounts.balances(b).collect::<Vec<_>>(),
            [(
                CurrencyId(5),
                Amounts {
                    available: 1,
                    held: 0
                }
            )]
        );
        assert_eq!(accounts.all_balances().count(), 7);
        assert_eq!((accounts.user(a), accounts.user(b)), (7, 9));
    }
}
