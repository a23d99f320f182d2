//! Where to cut an input in two: every point of a short input; for a long one, each side of
//! every CR and LF (where line-ending bugs live), the middle of every multi-byte UTF-8
//! sequence near the start, and evenly spaced points.

/// At most this many cut points for one input.
const MAX_POINTS: usize = 48;
/// Inputs up to this size are cut at every point.
const EVERY_POINT: usize = 64;

/// The cut points of `data` (each in `1..data.len()`).
pub(crate) fn points(data: &[u8]) -> Vec<usize> {
    let len = data.len();
    if len < 2 {
        return Vec::new();
    }
    if len <= EVERY_POINT {
        return (1..len).collect();
    }
    let mut points = Vec::new();
    for (i, byte) in data.iter().enumerate() {
        if points.len() >= MAX_POINTS / 2 {
            break;
        }
        let line_end = matches!(byte, b'\r' | b'\n');
        let inside_char = (byte & 0xC0) == 0x80;
        if (line_end || inside_char) && i > 0 {
            points.push(i);
            if i + 1 < len {
                points.push(i + 1);
            }
        }
    }
    let step = (len / (MAX_POINTS / 2)).max(1);
    points.extend((1..len).step_by(step).take(MAX_POINTS / 2));
    points.sort_unstable();
    points.dedup();
    points
}

#[cfg(test)]
mod tests {
    #[test]
    fn short_inputs_are_cut_everywhere_and_long_ones_at_line_ends() {
        assert_eq!(super::points(b"abc"), vec![1, 2]);
        let mut long = vec![b'a'; 200];
        long[150] = b'\r';
        let points = super::points(&long);
        assert!(points.contains(&150) && points.contains(&151));
        assert!(points.iter().all(|p| (1..200).contains(p)));
    }
}
