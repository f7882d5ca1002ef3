//! Signals that look like a plant's: slow daily trends with noise, and counters that grow with
//! a flow and are reset by day or by command.

use rand::Rng;

/// A slow sine over a period, around a base, with Gaussian-like noise.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Trend {
    pub base: f64,
    pub amplitude: f64,
    pub period_s: f64,
    pub noise: f64,
    /// Where in its period the signal starts, 0..1, so that gateways differ.
    pub phase: f64,
}

impl Trend {
    /// The value at Unix time `t`, rounded to 3 decimals like a sensor reading.
    pub fn at(&self, t: f64, rng: &mut impl Rng) -> f64 {
        let angle = std::f64::consts::TAU * (t / self.period_s + self.phase);
        // The sum of three uniforms is close enough to a normal distribution for a sensor.
        let noise: f64 = (0..3).map(|_| rng.random_range(-1.0..1.0)).sum::<f64>() / 3.0 * self.noise;
        ((self.base + self.amplitude * angle.sin() + noise) * 1000.0).round() / 1000.0
    }
}

/// A flow-meter counter: grows by `rate × seconds`, reset to 0 by command, and (the daily one)
/// at UTC midnight.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Counter {
    pub value: f64,
    /// The UTC day (days since 1970) of the last advance, for daily resets.
    day: Option<i64>,
}

impl Counter {
    /// Advances to Unix time `t` with `amount` more; a daily counter restarts on a new day.
    pub fn advance(&mut self, t: f64, amount: f64, daily: bool) {
        let day = (t / 86_400.0).floor() as i64;
        if daily && self.day.is_some_and(|d| d != day) {
            self.value = 0.0;
        }
        self.day = Some(day);
        self.value = ((self.value + amount.max(0.0)) * 1000.0).round() / 1000.0;
    }

    /// Back to zero (reset-main-counter, reset-daily-counter).
    pub fn reset(&mut self) {
        self.value = 0.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn trends_stay_near_their_band() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let trend = Trend {
            base: 20.0,
            amplitude: 5.0,
            period_s: 86_400.0,
            noise: 0.5,
            phase: 0.25,
        };
        for i in 0..1000 {
            let v = trend.at(f64::from(i) * 60.0, &mut rng);
            assert!((14.5..=25.5).contains(&v), "{v}");
        }
    }

    #[test]
    fn counters_grow_and_reset() {
        let mut c = Counter::default();
        c.advance(86_400.0 * 10.0 + 100.0, 5.0, true);
        c.advance(86_400.0 * 10.0 + 200.0, 2.5, true);
        assert_eq!(c.value, 7.5);
        c.advance(86_400.0 * 11.0 + 1.0, 1.0, true);
        assert_eq!(c.value, 1.0, "a daily counter restarts at midnight");
        let mut main = Counter::default();
        main.advance(1.0, 3.0, false);
        main.advance(86_400.0 * 3.0, 3.0, false);
        assert_eq!(main.value, 6.0, "the main counter does not");
        main.reset();
        assert_eq!(main.value, 0.0);
    }
}
