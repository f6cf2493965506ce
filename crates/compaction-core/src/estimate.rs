//! Token estimation, a port with a documented default.

/// Estimates how many tokens a text costs a model.
pub trait TokenEstimator: Send + Sync {
    /// Estimated tokens of `text`.
    fn estimate(&self, text: &str) -> usize;
}

/// The default estimator: one token per four characters (Unicode scalar values), rounded up.
/// This is the usual rule of thumb for English prose with BPE tokenizers; it over-counts
/// slightly for code and under-counts for CJK text.
#[derive(Debug, Clone, Copy, Default)]
pub struct CharsPerToken;

impl TokenEstimator for CharsPerToken {
    fn estimate(&self, text: &str) -> usize {
        text.chars().count().div_ceil(4)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_up() {
        assert_eq!(CharsPerToken.estimate(""), 0);
        assert_eq!(CharsPerToken.estimate("abcde"), 2);
        assert_eq!(CharsPerToken.estimate("ééé"), 1);
    }
}
