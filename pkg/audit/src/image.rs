//! What an image reference pins: a digest, a tag, `latest`, or nothing.

/// How exactly an image reference names what runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pin {
    /// `name@sha256:...` (a tag beside the digest does not matter).
    Digest,
    Tag,
    /// `name:latest`.
    Latest,
    /// No tag: the runtime pulls `latest`.
    Untagged,
}

pub(crate) const LATEST: &str = "latest";

pub(crate) fn pin(image: &str) -> Pin {
    if let Some((_, digest)) = image.split_once('@') {
        if digest.contains(':') {
            return Pin::Digest;
        }
    }
    // A colon before the last slash is a registry's port (`registry:5000/app`).
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.split_once(':') {
        Some((_, LATEST)) => Pin::Latest,
        Some((_, tag)) if !tag.is_empty() => Pin::Tag,
        _ => Pin::Untagged,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references() {
        assert_eq!(pin("nginx"), Pin::Untagged);
        assert_eq!(pin("nginx:"), Pin::Untagged);
        assert_eq!(pin("nginx:latest"), Pin::Latest);
        assert_eq!(pin("nginx:1.27"), Pin::Tag);
        assert_eq!(pin("nginx:latest-alpine"), Pin::Tag);
        assert_eq!(pin("registry:5000/team/app"), Pin::Untagged);
        assert_eq!(pin("registry:5000/team/app:latest"), Pin::Latest);
        assert_eq!(pin("registry:5000/team/app:v2"), Pin::Tag);
        assert_eq!(pin("ghcr.io/org/app@sha256:0123abcd"), Pin::Digest);
        assert_eq!(pin("app:latest@sha256:0123abcd"), Pin::Digest);
        assert_eq!(pin("app@"), Pin::Untagged);
    }
}
