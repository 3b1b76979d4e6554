//! Logit edits that depend on token ids: the repetition, frequency and presence
//! penalties over the recent-token window, and the logit bias.

use super::window::TokenWindow;

/// CTRL's repetition penalty as Hugging Face's `RepetitionPenaltyLogitsProcessor`
/// applies it: for each distinct token in the window, a positive logit is divided by
/// `penalty` and a negative one multiplied by it (once, however often the token occurs).
pub fn repetition(logits: &mut [f32], window: &mut TokenWindow, penalty: f32) {
    window.for_each_distinct(|t, _| {
        let l = &mut logits[t as usize];
        *l = if *l < 0.0 { *l * penalty } else { *l / penalty };
    });
}

/// OpenAI's frequency and presence penalties (as llama.cpp applies them over its last-n
/// window): `logit -= count * frequency + (count > 0) * presence`, where `count` is how
/// often the token occurs in the window.
pub fn frequency_presence(
    logits: &mut [f32],
    window: &mut TokenWindow,
    frequency: f32,
    presence: f32,
) {
    window.for_each_distinct(|t, count| {
        logits[t as usize] -= count as f32 * frequency + presence;
    });
}

/// Adds each `(token, bias)` to the logits; a `-inf` bias bans the token.
pub fn logit_bias(logits: &mut [f32], bias: &[(u32, f32)]) {
    for &(t, b) in bias {
        logits[t as usize] += b;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn penalties_touch_only_window_tokens() {
        let mut w = TokenWindow::new(8, 4);
        for t in [0, 2, 2] {
            w.push(t);
        }
        let mut l = [2.0, 1.0, -1.0, 3.0];
        repetition(&mut l, &mut w, 2.0);
        assert_eq!(l, [1.0, 1.0, -2.0, 3.0]);
        frequency_presence(&mut l, &mut w, 0.5, 0.25);
        assert_eq!(l, [0.25, 1.0, -3.25, 3.0]);
        logit_bias(&mut l, &[(1, f32::NEG_INFINITY), (3, 1.0)]);
        assert_eq!(l, [0.25, f32::NEG_INFINITY, -3.25, 4.0]);
    }
}
