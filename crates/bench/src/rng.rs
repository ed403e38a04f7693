//! A tiny deterministic PRNG (SplitMix64) and the few distributions the generators draw from.
//!
//! Only integer arithmetic and IEEE-754 basic operations (+, -, *, /) are used, so the same seed
//! gives the same workload on every machine and every libm (no `powf`, `ln` or `cbrt` from the
//! platform).

/// SplitMix64 (Steele, Lea and Flood 2014): 64 bits of state, passes BigCrush, and is trivially
/// reproducible.
#[derive(Clone, Debug)]
pub struct Rng {
    state: u64,
}

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (Lemire's multiply-shift; the bias is below 2^-32 for our ranges).
    /// `n == 0` gives 0.
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// Uniform in `[0, 1)` with 53 bits.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// `true` with probability `1/2`.
    pub fn coin(&mut self) -> bool {
        self.next_u64() >> 63 == 1
    }

    /// A Pareto sample with scale 1 and shape 1.5 (exchange-core draws symbol weights from
    /// Pareto(0.001, 1.5); the scale cancels when the weights are normalised):
    /// `U^(-1/1.5) = 1 / cbrt(U^2)` with `U` uniform in `(0, 1]`.
    pub fn pareto_1_5(&mut self) -> f64 {
        let u = 1.0 - self.unit();
        1.0 / cbrt_det(u * u)
    }
}

/// Cube root of a positive normal `v` by Newton's method from a bit-level first guess: only
/// basic IEEE operations, so it is bit-for-bit the same everywhere.
pub fn cbrt_det(v: f64) -> f64 {
    debug_assert!(v > 0.0 && v.is_normal());
    // Dividing the biased exponent by three gives a guess within a few percent.
    let mut y = f64::from_bits(v.to_bits() / 3 + 0x2A9F_7893_782D_A1CE);
    for _ in 0..6 {
        y -= (y * y * y - v) / (3.0 * y * y);
    }
    y
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        for _ in 0..1000 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        // A pinned value: a change of algorithm must be deliberate (it changes every workload).
        assert_eq!(Rng::new(0).next_u64(), 0xE220_A839_7B1D_CDAF);
    }

    #[test]
    fn below_stays_in_range() {
        let mut r = Rng::new(1);
        for n in [1u64, 2, 3, 6, 1000] {
            for _ in 0..1000 {
                assert!(r.below(n) < n);
            }
        }
        assert_eq!(r.below(0), 0);
    }

    #[test]
    fn cbrt_is_accurate() {
        for v in [1e-30, 1e-9, 0.001, 0.5, 1.0, 8.0, 27.0] {
            let y = cbrt_det(v);
            assert!((y * y * y - v).abs() <= v * 1e-12, "cbrt({v}) = {y}");
        }
    }
}
