//! Addresses karpor refuses to reach for a kubeconfig unless the operator allows them
//! (`kubernetes.allow_link_local_servers`): link-local addresses (IPv4 169.254.0.0/16,
//! IPv6 fe80::/10) and the cloud metadata services (`metadata.google.internal`,
//! `metadata`, `instance-data`, Alibaba's 100.100.100.200, AWS's fd00:ec2::254), which
//! answer any process on the host with the machine's own cloud credentials.
//!
//! Two checks: [`check_literal`] on the URLs' text (registration, validation, every
//! client), and [`check_resolved`] on the addresses a host name resolves to, just before a
//! client is built. A name that resolves to another address only after that check (DNS
//! rebinding) is not caught: the client resolves again when it connects.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use kube::config::Kubeconfig;

use crate::kubeconfig::{mask_url, problem, Problem};

/// The config key that lifts these checks, named in every refusal.
const ALLOW_KEY: &str = "kubernetes.allow_link_local_servers";

/// Host names of cloud metadata services (compared lowercase, without a trailing dot).
const METADATA_NAMES: &[&str] = &[
    "metadata",
    "metadata.google.internal",
    "metadata.goog",
    "instance-data",
    "instance-data.ec2.internal",
];

/// Alibaba Cloud's metadata service (outside the link-local range).
const ALIBABA_METADATA: Ipv4Addr = Ipv4Addr::new(100, 100, 100, 200);
/// AWS's IPv6 metadata service (outside fe80::/10).
const AWS_METADATA_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254);

/// One URL karpor would connect to: which field, and the text.
#[derive(Clone, Copy)]
struct Target<'a> {
    cluster: &'a str,
    field: &'static str,
    url: &'a str,
}

/// Every server and proxy URL of the kubeconfig.
fn targets(config: &Kubeconfig) -> impl Iterator<Item = Target<'_>> {
    config.clusters.iter().flat_map(|named| {
        let cluster = named.cluster.as_ref();
        let server = cluster.and_then(|c| c.server.as_deref());
        let proxy = cluster.and_then(|c| c.proxy_url.as_deref());
        [("server", server), ("proxy-url", proxy)]
            .into_iter()
            .filter_map(move |(field, url)| {
                url.map(|url| Target {
                    cluster: &named.name,
                    field,
                    url,
                })
            })
    })
}

/// Refuses a kubeconfig whose server or proxy URL names a link-local or metadata address
/// by its text (an address, in any form `inet_aton` reads, or a metadata host name).
pub(crate) fn check_literal(config: &Kubeconfig) -> Result<(), Problem> {
    for target in targets(config) {
        let host = host_of(&target)?;
        if forbidden_name(&host) || literal_ip(&host).is_some_and(forbidden_ip) {
            return problem(format!(
                "cluster {:?}: {} {} is a link-local or cloud metadata address; {}",
                target.cluster,
                target.field,
                mask_url(target.url),
                allow_hint()
            ));
        }
    }
    Ok(())
}

/// Refuses a kubeconfig whose client would connect to a host name that resolves to a
/// link-local or metadata address: the proxy when there is one, else the server (through
/// a proxy, karpor never resolves the server itself). A name that does not resolve within
/// `within` is left to the client, whose connection fails the same way and is retried.
pub(crate) async fn check_resolved(config: &Kubeconfig, within: Duration) -> Result<(), Problem> {
    for target in connected(config) {
        let host = host_of(&target)?;
        if literal_ip(&host).is_some() {
            continue;
        }
        let Ok(Ok(addresses)) =
            tokio::time::timeout(within, tokio::net::lookup_host((host.as_str(), 443))).await
        else {
            continue;
        };
        refuse_resolved(&target, addresses.map(|a| a.ip()))?;
    }
    Ok(())
}

/// The refusal of a target whose name resolved to `addresses`, if any is forbidden.
fn refuse_resolved(
    target: &Target<'_>,
    addresses: impl IntoIterator<Item = IpAddr>,
) -> Result<(), Problem> {
    match addresses.into_iter().find(|ip| forbidden_ip(*ip)) {
        None => Ok(()),
        Some(bad) => problem(format!(
            "cluster {:?}: {} {} resolves to {bad}, a link-local or cloud metadata address; {}",
            target.cluster,
            target.field,
            mask_url(target.url),
            allow_hint()
        )),
    }
}

/// The URLs a client connects to itself: each cluster's proxy, else its server.
fn connected(config: &Kubeconfig) -> Vec<Target<'_>> {
    let all: Vec<Target<'_>> = targets(config).collect();
    let proxied = |cluster: &str| {
        all.iter()
            .any(|t| t.cluster == cluster && t.field == "proxy-url")
    };
    all.iter()
        .filter(|t| t.field == "proxy-url" || !proxied(t.cluster))
        .copied()
        .collect()
}

fn allow_hint() -> String {
    format!("an operator can allow such servers with {ALLOW_KEY}: true")
}

/// The URL's host, lowercase, without IPv6 brackets or a trailing dot.
fn host_of(target: &Target<'_>) -> Result<String, Problem> {
    let uri: http::Uri = target.url.parse().map_err(|_| {
        Problem(format!(
            "cluster {:?}: {} is not a URL",
            target.cluster, target.field
        ))
    })?;
    let Some(host) = uri.host().filter(|h| !h.is_empty()) else {
        return problem(format!(
            "cluster {:?}: {} has no host",
            target.cluster, target.field
        ));
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Ok(host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase())
}

fn forbidden_name(host: &str) -> bool {
    METADATA_NAMES.contains(&host)
}

/// A host that is an address: IPv6, dotted IPv4, or a form `inet_aton` (and so the
/// system's resolver) reads as IPv4 (`2852039166`, `0xa9.0xfe.0xa9.0xfe`, `169.254.43518`).
fn literal_ip(host: &str) -> Option<IpAddr> {
    host.parse::<IpAddr>()
        .ok()
        .or_else(|| inet_aton(host).map(IpAddr::V4))
}

fn forbidden_ip(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => forbidden_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => forbidden_v4(v4),
            None => (v6.segments()[0] & 0xffc0) == 0xfe80 || v6 == AWS_METADATA_V6,
        },
    }
}

fn forbidden_v4(ip: Ipv4Addr) -> bool {
    ip.is_link_local() || ip == ALIBABA_METADATA
}

/// IPv4 in the forms of C's `inet_aton`: one to four parts, each decimal, octal (`0…`)
/// or hexadecimal (`0x…`), the last filling the remaining bytes.
fn inet_aton(host: &str) -> Option<Ipv4Addr> {
    let parts: Vec<u32> = host.split('.').map(aton_part).collect::<Option<Vec<_>>>()?;
    let (last, leading) = parts.split_last()?;
    if leading.len() > 3 || leading.iter().any(|p| *p > 0xff) {
        return None;
    }
    let last_bits = 32 - 8 * leading.len() as u32;
    if last_bits < 32 && *last >= 1 << last_bits {
        return None;
    }
    let high = leading
        .iter()
        .enumerate()
        .fold(0u32, |acc, (i, p)| acc | (p << (24 - 8 * i as u32)));
    Some(Ipv4Addr::from(high | last))
}

fn aton_part(part: &str) -> Option<u32> {
    if let Some(hex) = part.strip_prefix("0x").or_else(|| part.strip_prefix("0X")) {
        return u32::from_str_radix(hex, 16).ok();
    }
    if part.len() > 1 && part.starts_with('0') {
        return u32::from_str_radix(&part[1..], 8).ok();
    }
    if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    part.parse().ok()
}

#[cfg(test)]
mod tests;
