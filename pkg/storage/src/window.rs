//! The rows a search returns: the query's own OFFSET and LIMIT first, then the caller's
//! page inside them, computed once for every backend.

use karpor_search::Query;

/// What a backend fetches: rows `from..from + size` of all matches in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub from: u64,
    pub size: u64,
}

/// The fetch window for page `from`/`size` of `query`.
pub fn window(query: &Query, from: u64, size: u64) -> Window {
    let offset = query.offset.unwrap_or(0);
    let size = match query.limit {
        Some(limit) => size.min(limit.saturating_sub(from)),
        None => size,
    };
    Window {
        from: offset.saturating_add(from),
        size,
    }
}

/// The total a search reports from the number of all matches.
pub fn total(query: &Query, matches: u64) -> u64 {
    let after_offset = matches.saturating_sub(query.offset.unwrap_or(0));
    match query.limit {
        Some(limit) => after_offset.min(limit),
        None => after_offset,
    }
}

/// The total from matches counted up to `cap` (`counted` is at most `cap + 1`), and
/// whether it is exact: past the cap it is a lower bound, unless the query's own LIMIT
/// ends the matches first.
pub fn capped_total(query: &Query, counted: u64, cap: u64) -> (u64, bool) {
    if counted <= cap {
        return (total(query, counted), true);
    }
    let offset = query.offset.unwrap_or(0);
    let exact = query
        .limit
        .is_some_and(|limit| limit <= cap.saturating_sub(offset));
    (total(query, cap), exact)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(limit: Option<u64>, offset: Option<u64>) -> Query {
        let mut q = karpor_search::parse("select * from resources").unwrap();
        q.limit = limit;
        q.offset = offset;
        q
    }

    #[test]
    fn pages_live_inside_the_query_limit_and_offset() {
        let q = query(Some(25), Some(10));
        assert_eq!(window(&q, 0, 10), Window { from: 10, size: 10 });
        assert_eq!(window(&q, 20, 10), Window { from: 30, size: 5 });
        assert_eq!(window(&q, 30, 10), Window { from: 40, size: 0 });
        assert_eq!(total(&q, 100), 25);
        assert_eq!(total(&q, 12), 2);
        assert_eq!(total(&query(None, None), 7), 7);
    }

    #[test]
    fn a_total_past_its_cap_is_a_lower_bound_unless_the_limit_ends_first() {
        let all = query(None, None);
        assert_eq!(capped_total(&all, 5, 10), (5, true));
        assert_eq!(capped_total(&all, 10, 10), (10, true));
        assert_eq!(capped_total(&all, 11, 10), (10, false));
        assert_eq!(capped_total(&query(Some(5), None), 11, 10), (5, true));
        assert_eq!(capped_total(&query(Some(5), Some(8)), 11, 10), (2, false));
        assert_eq!(capped_total(&query(Some(2), Some(8)), 11, 10), (2, true));
    }
}
