//! A line diff of two summaries, for the console's "what did this run
//! change" page. Hand-written (longest common subsequence over lines):
//! summaries are a few hundred lines at most, and the common prefix and
//! suffix are cut first, so the table stays small; past [`MAX_CELLS`] the
//! middle is shown as removed-then-added rather than computed.

/// One line of a diff.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Line<'a> {
    Same(&'a str),
    Removed(&'a str),
    Added(&'a str),
}

/// Largest LCS table (lines before × lines after, after cutting the
/// common ends) computed: 4M cells of `u32`, 16 MB and a few
/// milliseconds. Beyond it the diff is coarse.
pub(super) const MAX_CELLS: usize = 4_000_000;

/// The lines of `before` and `after`, as a diff: every line of `before`
/// is `Same` or `Removed`, every line of `after` `Same` or `Added`, in
/// order.
pub(super) fn diff_lines<'a>(before: &'a str, after: &'a str) -> Vec<Line<'a>> {
    let a: Vec<&str> = before.lines().collect();
    let b: Vec<&str> = after.lines().collect();
    let prefix = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let suffix = a[prefix..]
        .iter()
        .rev()
        .zip(b[prefix..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (a_mid, b_mid) = (&a[prefix..a.len() - suffix], &b[prefix..b.len() - suffix]);
    let mut out: Vec<Line<'a>> = a[..prefix].iter().map(|l| Line::Same(l)).collect();
    if a_mid.len().saturating_mul(b_mid.len()) > MAX_CELLS {
        out.extend(a_mid.iter().map(|l| Line::Removed(l)));
        out.extend(b_mid.iter().map(|l| Line::Added(l)));
    } else {
        lcs(a_mid, b_mid, &mut out);
    }
    out.extend(a[a.len() - suffix..].iter().map(|l| Line::Same(l)));
    out
}

/// The diff of `a` and `b` by their longest common subsequence.
fn lcs<'a>(a: &[&'a str], b: &[&'a str], out: &mut Vec<Line<'a>>) {
    let (n, m) = (a.len(), b.len());
    // table[i][j]: LCS length of a[i..] and b[j..].
    let width = m + 1;
    let mut table = vec![0u32; (n + 1) * width];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            table[i * width + j] = if a[i] == b[j] {
                table[(i + 1) * width + j + 1] + 1
            } else {
                table[(i + 1) * width + j].max(table[i * width + j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    while i < n && j < m {
        if a[i] == b[j] {
            out.push(Line::Same(a[i]));
            i += 1;
            j += 1;
        } else if table[(i + 1) * width + j] >= table[i * width + j + 1] {
            out.push(Line::Removed(a[i]));
            i += 1;
        } else {
            out.push(Line::Added(b[j]));
            j += 1;
        }
    }
    out.extend(a[i..].iter().map(|l| Line::Removed(l)));
    out.extend(b[j..].iter().map(|l| Line::Added(l)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use Line::*;

    #[test]
    fn a_changed_line_is_removed_then_added_between_equal_ones() {
        assert_eq!(
            diff_lines("a\nb\nc\n", "a\nB\nc\nd\n"),
            vec![Same("a"), Removed("b"), Added("B"), Same("c"), Added("d")]
        );
    }

    #[test]
    fn no_previous_summary_is_all_added_and_equal_texts_all_same() {
        assert_eq!(diff_lines("", "x\ny"), vec![Added("x"), Added("y")]);
        assert_eq!(diff_lines("x\ny", "x\ny"), vec![Same("x"), Same("y")]);
    }

    #[test]
    fn the_diff_keeps_the_longest_common_subsequence() {
        let d = diff_lines("x\na\ny\nb\nz", "a\nq\nb\nr");
        let same: Vec<_> = d.iter().filter(|l| matches!(l, Same(_))).collect();
        assert_eq!(same, vec![&Same("a"), &Same("b")]);
        let removed = d.iter().filter(|l| matches!(l, Removed(_))).count();
        let added = d.iter().filter(|l| matches!(l, Added(_))).count();
        assert_eq!((removed, added), (3, 2));
    }

    #[test]
    fn a_huge_middle_is_shown_coarsely_not_computed() {
        let before: String = (0..2_100).map(|i| format!("a{i}\n")).collect();
        let after: String = (0..2_100).map(|i| format!("b{i}\n")).collect();
        let d = diff_lines(&before, &after);
        assert_eq!(d.len(), 4_200);
        assert!(matches!(d[0], Removed("a0")));
        assert!(matches!(d[2_100], Added("b0")));
    }
}
