//! OHLCV candles from trades, by the command's sequenced time.

use std::collections::VecDeque;

pub const MINUTE_NS: i64 = 60_000_000_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Candle {
    /// Start of the interval, ns since the Unix epoch.
    pub start_ns: i64,
    pub open: i64,
    pub high: i64,
    pub low: i64,
    pub close: i64,
    /// Lots traded.
    pub volume: i64,
    pub trades: u64,
}

/// The most recent candles of one symbol, oldest first. Intervals without trades have no
/// candle.
#[derive(Clone, Debug)]
pub struct Candles {
    interval_ns: i64,
    keep: usize,
    candles: VecDeque<Candle>,
}

impl Candles {
    pub fn new(interval_ns: i64, keep: usize) -> Candles {
        assert!(interval_ns > 0 && keep > 0);
        Candles {
            interval_ns,
            keep,
            candles: VecDeque::new(),
        }
    }

    /// One-minute candles, the last day of them.
    pub fn minutes() -> Candles {
        Candles::new(MINUTE_NS, 24 * 60)
    }

    /// Adds a trade and returns its candle as it now stands.
    pub fn on_trade(&mut self, ts_ns: i64, price: i64, qty: i64) -> Candle {
        let start_ns = ts_ns.div_euclid(self.interval_ns) * self.interval_ns;
        match self.candles.back_mut() {
            Some(c) if c.start_ns >= start_ns => {
                // The sequencer's time never goes back; were it to, the trade joins the
                // current candle rather than rewriting history.
                c.high = c.high.max(price);
                c.low = c.low.min(price);
                c.close = price;
                c.volume = c.volume.saturating_add(qty);
                c.trades += 1;
            }
            _ => {
                if self.candles.len() == self.keep {
                    self.candles.pop_front();
                }
                self.candles.push_back(Candle {
                    start_ns,
                    open: price,
                    high: price,
                    low: price,
                    close: price,
                    volume: qty,
                    trades: 1,
                });
            }
        }
        *self.candles.back().expect("just pushed")
    }

    /// The newest candle.
    pub fn last(&self) -> Option<Candle> {
        self.candles.back().copied()
    }

    /// The last `limit` candles, oldest first.
    pub fn recent(&self, limit: usize) -> Vec<Candle> {
        let skip = self.candles.len().saturating_sub(limit);
        self.candles.iter().skip(skip).copied().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trades_fold_into_minute_candles() {
        let mut c = Candles::new(MINUTE_NS, 2);
        c.on_trade(MINUTE_NS + 5, 100, 2);
        c.on_trade(MINUTE_NS + 6, 104, 1);
        let last = c.on_trade(2 * MINUTE_NS - 1, 99, 3);
        assert_eq!(
            last,
            Candle {
                start_ns: MINUTE_NS,
                open: 100,
                high: 104,
                low: 99,
                close: 99,
                volume: 6,
                trades: 3
            }
        );
        c.on_trade(2 * MINUTE_NS, 101, 1);
        c.on_trade(5 * MINUTE_NS, 102, 1);
        let kept: Vec<i64> = c.recent(10).iter().map(|c| c.start_ns).collect();
        assert_eq!(kept, vec![2 * MINUTE_NS, 5 * MINUTE_NS]);
        assert_eq!(c.recent(1)[0].open, 102);
    }
}
