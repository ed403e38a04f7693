//! The venue's symbols as FIX sees them: names, ids, and the decimal size of one tick and one
//! lot, so that prices and quantities convert exactly (never rounded).

use std::collections::BTreeMap;

use rialto_core::{SymbolId, SymbolSpec};
use rialto_fix::Decimal;
use rialto_fix::decimal::DecimalError;

use crate::config::InstrumentSettings;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Instrument {
    pub id: SymbolId,
    pub spec: SymbolSpec,
    pub price_tick: Decimal,
    pub qty_lot: Decimal,
}

impl Instrument {
    pub fn name(&self) -> &str {
        self.spec.symbol.as_str()
    }

    pub fn ticks(&self, price: Decimal) -> Result<i64, DecimalError> {
        price.to_units(self.price_tick)
    }

    pub fn lots(&self, qty: Decimal) -> Result<i64, DecimalError> {
        qty.to_units(self.qty_lot)
    }

    /// A price in ticks as a decimal (saturating: engine prices always fit).
    pub fn price(&self, ticks: i64) -> Decimal {
        Decimal::from_units(ticks, self.price_tick).unwrap_or(Decimal::new(i64::MAX, 0))
    }

    pub fn qty(&self, lots: i64) -> Decimal {
        Decimal::from_units(lots, self.qty_lot).unwrap_or(Decimal::new(i64::MAX, 0))
    }
}

/// The symbol table, refreshed from the engine's symbol list.
#[derive(Default)]
pub struct Instruments {
    by_name: BTreeMap<Vec<u8>, Instrument>,
    by_id: BTreeMap<SymbolId, Instrument>,
    /// Decimal sizes from the configuration, by symbol name.
    settings: BTreeMap<String, (Decimal, Decimal)>,
}

impl Instruments {
    /// Settings were validated with the configuration; a bad one falls back to 1.
    pub fn new(settings: &BTreeMap<String, InstrumentSettings>) -> Instruments {
        let parse = |t: &str| Decimal::parse(t.as_bytes()).unwrap_or(Decimal::new(1, 0));
        Instruments {
            settings: settings
                .iter()
                .map(|(name, s)| (name.clone(), (parse(&s.price_tick), parse(&s.qty_lot))))
                .collect(),
            ..Instruments::default()
        }
    }

    /// Replaces the table with the engine's current symbols.
    pub fn refresh(&mut self, symbols: &[(SymbolId, SymbolSpec)]) {
        self.by_name.clear();
        self.by_id.clear();
        for &(id, spec) in symbols {
            self.add(id, spec);
        }
    }

    /// Adds one symbol (the engine added it), or sets it again.
    pub fn add(&mut self, id: SymbolId, spec: SymbolSpec) {
        let (price_tick, qty_lot) = self
            .settings
            .get(spec.symbol.as_str())
            .copied()
            .unwrap_or((Decimal::new(1, 0), Decimal::new(1, 0)));
        let instrument = Instrument {
            id,
            spec,
            price_tick,
            qty_lot,
        };
        self.by_name
            .insert(spec.symbol.as_str().as_bytes().to_vec(), instrument);
        self.by_id.insert(id, instrument);
    }

    pub fn by_name(&self, name: &[u8]) -> Option<&Instrument> {
        self.by_name.get(name)
    }

    pub fn by_id(&self, id: SymbolId) -> Option<&Instrument> {
        self.by_id.get(&id)
    }

    pub fn all(&self) -> impl Iterator<Item = &Instrument> {
        self.by_name.values()
    }
}
