//! Choosing the next token from logits: greedy, or temperature with top-k and top-p, seeded.
//!
//! The sampler works on a plain `&mut [f32]` of logits, after the constrained decoder (if any)
//! has set forbidden tokens to negative infinity, so it needs no tensor library.

/// How to pick tokens. `temperature == 0` (the default) is greedy decoding.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SamplingParams {
    /// Softmax temperature; `0` picks the most likely token.
    pub temperature: f32,
    /// Keep only the `k` most likely tokens (`None`: all).
    pub top_k: Option<usize>,
    /// Keep the smallest set of most likely tokens whose probability reaches `p` (`1.0`: all).
    pub top_p: f32,
    /// Seed of the random generator; the same seed, prompt and parameters give the same output.
    pub seed: Option<u64>,
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams {
            temperature: 0.0,
            top_k: None,
            top_p: 1.0,
            seed: None,
        }
    }
}

impl SamplingParams {
    /// Whether this is greedy decoding.
    pub fn is_greedy(&self) -> bool {
        self.temperature <= 0.0 || self.top_k == Some(1)
    }
}

/// A sampler: the parameters plus the random generator's state.
#[derive(Debug, Clone)]
pub struct Sampler {
    params: SamplingParams,
    rng: fastrand::Rng,
    candidates: Vec<(u32, f32)>,
}

impl Sampler {
    /// A sampler; seeded from `params.seed`, or from the OS when there is none.
    pub fn new(params: SamplingParams) -> Self {
        let rng = match params.seed {
            Some(seed) => fastrand::Rng::with_seed(seed),
            None => fastrand::Rng::new(),
        };
        Sampler {
            params,
            rng,
            candidates: Vec::new(),
        }
    }

    /// Picks a token. Logits of `-inf` are never picked unless every logit is `-inf` (then
    /// `None`). NaN logits count as `-inf`.
    pub fn sample(&mut self, logits: &[f32]) -> Option<u32> {
        if self.params.is_greedy() {
            return argmax(logits);
        }
        let temperature = self.params.temperature;
        self.candidates.clear();
        self.candidates.extend(
            logits
                .iter()
                .enumerate()
                .filter(|(_, l)| l.is_finite())
                .map(|(i, l)| (i as u32, *l / temperature)),
        );
        if self.candidates.is_empty() {
            return None;
        }
        let by_logit_desc =
            |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        if let Some(k) = self
            .params
            .top_k
            .filter(|k| *k > 0 && *k < self.candidates.len())
        {
            self.candidates.select_nth_unstable_by(k - 1, by_logit_desc);
            self.candidates.truncate(k);
        }
        // Softmax over the candidates.
        let max = self
            .candidates
            .iter()
            .map(|c| c.1)
            .fold(f32::NEG_INFINITY, f32::max);
        let mut total = 0.0f64;
        for candidate in &mut self.candidates {
            candidate.1 = (candidate.1 - max).exp();
            total += f64::from(candidate.1);
        }
        let top_p = self.params.top_p;
        if top_p < 1.0 {
            self.keep_nucleus(top_p, total);
            total = self.candidates.iter().map(|c| f64::from(c.1)).sum();
        }
        let mut point = self.rng.f64() * total;
        for &(id, weight) in &self.candidates {
            point -= f64::from(weight);
            if point <= 0.0 {
                return Some(id);
            }
        }
        self.candidates.last().map(|c| c.0)
    }

    /// Keeps the most likely candidates whose mass reaches `top_p` of `total`. Finds them with
    /// partial selections of growing size rather than sorting the whole vocabulary.
    fn keep_nucleus(&mut self, top_p: f32, total: f64) {
        let target = f64::from(top_p.max(0.0)) * total;
        let by_weight_desc =
            |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        let mut k = 64usize;
        loop {
            let n = self.candidates.len();
            if k < n {
                self.candidates
                    .select_nth_unstable_by(k - 1, by_weight_desc);
            }
            let head = k.min(n);
            self.candidates[..head].sort_unstable_by(by_weight_desc);
            let mut mass = 0.0f64;
            for i in 0..head {
                mass += f64::from(self.candidates[i].1);
                if mass >= target {
                    self.candidates.truncate(i + 1);
                    return;
                }
            }
            if head == n {
                return;
            }
            k *= 4;
        }
    }
}

/// The index of the largest finite logit (first one on ties), `None` when there is none.
pub fn argmax(logits: &[f32]) -> Option<u32> {
    let mut best: Option<(usize, f32)> = None;
    for (i, &l) in logits.iter().enumerate() {
        if !l.is_finite() {
            continue;
        }
        if best.is_none_or(|(_, b)| l > b) {
            best = Some((i, l));
        }
    }
    best.map(|(i, _)| i as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn logits() -> Vec<f32> {
        vec![1.0, 3.0, 2.0, f32::NEG_INFINITY, 2.5, 0.5]
    }

    #[test]
    fn greedy_picks_the_largest_finite_logit() {
        let mut sampler = Sampler::new(SamplingParams::default());
        assert_eq!(sampler.sample(&logits()), Some(1));
        assert_eq!(sampler.sample(&[f32::NEG_INFINITY, f32::NAN]), None);
        assert_eq!(argmax(&[0.0, 1.0, 1.0]), Some(1));
    }

    #[test]
    fn the_same_seed_gives_the_same_tokens() {
        let params = SamplingParams {
            temperature: 1.5,
            seed: Some(42),
            ..SamplingParams::default()
        };
        let draw = |params| {
            let mut sampler = Sampler::new(params);
            (0..50)
                .map(|_| sampler.sample(&logits()))
                .collect::<Vec<_>>()
        };
        let a = draw(params);
        assert_eq!(a, draw(params));
        assert_ne!(
            a,
            draw(SamplingParams {
                seed: Some(43),
                ..params
            })
        );
        // A high temperature spreads the picks, but never onto a forbidden token.
        assert!(a.iter().all(|t| *t != Some(3)));
        assert!(a.iter().collect::<std::collections::HashSet<_>>().len() > 2);
    }

    #[test]
    fn top_k_and_top_p_restrict_the_candidates() {
        let mut top_k = Sampler::new(SamplingParams {
            temperature: 1.0,
            top_k: Some(2),
            seed: Some(1),
            ..SamplingParams::default()
        });
        for _ in 0..100 {
            let t = top_k.sample(&logits());
            assert!(matches!(t, Some(1 | 4)), "{t:?}");
        }
        let mut top_p = Sampler::new(SamplingParams {
            temperature: 1.0,
            top_p: 0.01,
            seed: Some(1),
            ..SamplingParams::default()
        });
        for _ in 0..20 {
            assert_eq!(top_p.sample(&logits()), Some(1));
        }
    }

    #[test]
    fn nucleus_works_on_a_large_vocabulary() {
        let mut big: Vec<f32> = (0..10_000).map(|i| (i % 97) as f32 * 0.01).collect();
        big[1234] = 30.0;
        let mut sampler = Sampler::new(SamplingParams {
            temperature: 1.0,
            top_p: 0.5,
            seed: Some(7),
            ..SamplingParams::default()
        });
        assert_eq!(sampler.sample(&big), Some(1234));
    }
}
