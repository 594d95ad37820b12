//! Kubernetes resource quantities (`100m`, `2`, `128Mi`, `1e3`) as numbers, for sums of
//! capacity and requests.

/// A quantity in its base unit (cores, bytes, pods); `None` when it is not one.
pub fn parse(text: &str) -> Option<f64> {
    let text = text.trim();
    let split = text
        .find(|c: char| c.is_ascii_alphabetic() && c != 'e' && c != 'E')
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let factor = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        _ => return None,
    };
    Some(number * factor).filter(|v| v.is_finite())
}

/// CPU in millicores.
pub fn millicores(text: &str) -> Option<i64> {
    parse(text).map(|cores| (cores * 1000.0).round() as i64)
}

/// Memory (or a count) as a whole number.
pub fn whole(text: &str) -> Option<i64> {
    parse(text).map(|v| v.round() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_memory_and_counts() {
        assert_eq!(millicores("100m"), Some(100));
        assert_eq!(millicores("2"), Some(2000));
        assert_eq!(millicores("0.5"), Some(500));
        assert_eq!(whole("128Mi"), Some(128 * 1024 * 1024));
        assert_eq!(whole("16341136Ki"), Some(16_341_136 * 1024));
        assert_eq!(whole("1G"), Some(1_000_000_000));
        assert_eq!(whole("1e3"), Some(1000));
        assert_eq!(whole("110"), Some(110));
        assert_eq!(whole("12Qi"), None);
        assert_eq!(whole(""), None);
    }
}
