//! Which member syncs which cluster: rendezvous (highest random weight) hashing over the
//! live members, made binding by an exclusive claim in the metadata store. Every member
//! computes the same preference from the same member list, so none needs to coordinate:
//! a joining member is preferred for about 1/n of the clusters and takes only those; a
//! leaving one gives up only its own. The claim, not the hash, decides: a cluster is
//! synced by the member holding its claim, so two members that briefly disagree about the
//! member list can never both sync it.

use std::collections::{BTreeMap, BTreeSet};

use sha2::{Digest, Sha256};

/// A member's weight for a cluster: stable across processes, versions and platforms (so
/// not `std`'s hasher, whose algorithm may change between releases).
fn weight(member: &str, cluster: &str) -> [u8; 32] {
    let mut hash = Sha256::new();
    hash.update(member.as_bytes());
    hash.update([0]);
    hash.update(cluster.as_bytes());
    hash.finalize().into()
}

/// The member that should sync `cluster`: the one of highest weight.
pub fn preferred<'a>(members: &'a BTreeSet<String>, cluster: &str) -> Option<&'a str> {
    members
        .iter()
        .max_by_key(|m| weight(m, cluster))
        .map(String::as_str)
}

/// What a member does next about its clusters.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Unclaimed clusters it is preferred for.
    pub claim: Vec<String>,
    /// Its claims of clusters another live member is preferred for, or that are no
    /// longer registered: stopped, then released.
    pub release: Vec<String>,
}

/// The plan of member `me`, given the live members, the registered clusters and every
/// live claim (cluster → owner).
pub(crate) fn plan(
    me: &str,
    members: &BTreeSet<String>,
    clusters: &BTreeSet<String>,
    claims: &BTreeMap<String, String>,
) -> Plan {
    let mut plan = Plan::default();
    for cluster in clusters {
        let preferred = preferred(members, cluster);
        match claims.get(cluster).map(String::as_str) {
            None if preferred == Some(me) => plan.claim.push(cluster.clone()),
            Some(owner) if owner == me && preferred.is_some_and(|p| p != me) => {
                plan.release.push(cluster.clone())
            }
            _ => {}
        }
    }
    plan.release.extend(
        claims
            .iter()
            .filter(|(cluster, owner)| *owner == me && !clusters.contains(*cluster))
            .map(|(cluster, _)| cluster.clone()),
    );
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(prefix: &str, n: usize) -> BTreeSet<String> {
        (0..n).map(|i| format!("{prefix}-{i}")).collect()
    }

    fn owners(members: &BTreeSet<String>, clusters: &BTreeSet<String>) -> BTreeMap<String, String> {
        clusters
            .iter()
            .map(|c| (c.clone(), preferred(members, c).unwrap().to_owned()))
            .collect()
    }

    #[test]
    fn a_joining_member_takes_about_its_share_and_nothing_else_moves() {
        let clusters = names("cluster", 1000);
        let three = names("syncer", 3);
        let mut four = three.clone();
        four.insert("syncer-3".to_owned());
        let before = owners(&three, &clusters);
        let after = owners(&four, &clusters);
        let moved: Vec<_> = clusters
            .iter()
            .filter(|c| before[*c] != after[*c])
            .collect();
        // Every move is to the newcomer, and it is about a quarter.
        assert!(moved.iter().all(|c| after[*c] == "syncer-3"));
        assert!((200..300).contains(&moved.len()), "{} moved", moved.len());
        // Balanced: each of three holds about a third.
        for member in &three {
            let held = before.values().filter(|o| *o == member).count();
            assert!((283..383).contains(&held), "{member} holds {held}");
        }
    }

    #[test]
    fn a_leaving_member_gives_up_only_its_own() {
        let clusters = names("cluster", 300);
        let three = names("syncer", 3);
        let mut two = three.clone();
        two.remove("syncer-1");
        let before = owners(&three, &clusters);
        let after = owners(&two, &clusters);
        for cluster in &clusters {
            if before[cluster] != "syncer-1" {
                assert_eq!(before[cluster], after[cluster]);
            }
        }
    }

    #[test]
    fn a_member_claims_what_it_is_preferred_for_and_hands_over_the_rest() {
        let members = names("syncer", 2);
        let clusters = names("cluster", 20);
        let preferred_by = |m: &str| -> Vec<String> {
            clusters
                .iter()
                .filter(|c| preferred(&members, c) == Some(m))
                .cloned()
                .collect()
        };
        // Nothing claimed: each claims its own.
        let none = BTreeMap::new();
        let plan0 = plan("syncer-0", &members, &clusters, &none);
        assert_eq!(plan0.claim, preferred_by("syncer-0"));
        assert!(plan0.release.is_empty());
        // syncer-0 held everything (it was alone): it releases syncer-1's share, and a
        // deregistered cluster.
        let mut all: BTreeMap<String, String> = clusters
            .iter()
            .map(|c| (c.clone(), "syncer-0".to_owned()))
            .collect();
        all.insert("gone".to_owned(), "syncer-0".to_owned());
        let plan0 = plan("syncer-0", &members, &clusters, &all);
        assert!(plan0.claim.is_empty());
        let mut expected = preferred_by("syncer-1");
        expected.push("gone".to_owned());
        assert_eq!(plan0.release, expected);
        // syncer-1 waits for the release: claimed clusters are never taken.
        assert_eq!(plan("syncer-1", &members, &clusters, &all), Plan::default());
    }
}
