//! Laying out a session: the story's planted episodes, in order, spread
//! over the whole length with seeded jitter, and noise episodes between
//! them until the target length.

use super::sessions::Builder;

/// One episode of a story: writes a few messages.
pub type Episode<'a> = Box<dyn Fn(&mut Builder) + 'a>;

/// Writes `planted` in order, the first at the start and the others spread
/// evenly (± a third of the spacing) over `target` messages, with `noise`
/// episodes between them and after the last until `target` is reached.
pub fn weave(
    b: &mut Builder,
    target: usize,
    planted: &[Episode<'_>],
    mut noise: impl FnMut(&mut Builder),
) {
    let n = planted.len().max(1);
    let spacing = target / n;
    for (i, episode) in planted.iter().enumerate() {
        if i > 0 {
            let jitter = b.rng.below(spacing / 3 * 2 + 1);
            let at = (spacing * i + jitter).saturating_sub(spacing / 3);
            while b.len() < at {
                noise(b);
            }
        }
        episode(b);
    }
    while b.len() < target {
        noise(b);
    }
}

/// `episodes` rearranged: `order` lists every index once, so replacements
/// can be written next to what they replace and still land later in the
/// session.
pub fn in_order<'a>(episodes: Vec<Episode<'a>>, order: &[usize]) -> Vec<Episode<'a>> {
    assert_eq!(
        order.len(),
        episodes.len(),
        "generator bug: order is not a permutation"
    );
    let mut slots: Vec<Option<Episode<'a>>> = episodes.into_iter().map(Some).collect();
    order
        .iter()
        .map(|&i| {
            slots[i]
                .take()
                .expect("generator bug: index twice in order")
        })
        .collect()
}
