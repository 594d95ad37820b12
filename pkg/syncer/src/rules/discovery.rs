//! What a cluster serves, as its API server's discovery reports it: every resource type
//! with its verbs, and the version a `*` picks. Rules are resolved against this, never
//! against plural spellings.

use std::collections::HashMap;

use kube::core::Version;
use kube::discovery::{verbs, ApiCapabilities, ApiResource, Discovery};
use kube::Client;

/// A resource as discovery reports it.
#[derive(Debug, Clone)]
pub(crate) struct Discovered {
    pub resource: ApiResource,
    pub capabilities: ApiCapabilities,
    /// The version a `*` version picks: the group's preferred one when it serves the
    /// resource, else the most stable that does (batch/v1beta1 CronJobs before 1.21).
    pub preferred: bool,
}

impl Discovered {
    pub(crate) fn watchable(&self) -> bool {
        self.capabilities.supports_operation(verbs::LIST)
            && self.capabilities.supports_operation(verbs::WATCH)
    }
}

/// Every served resource type, with whether a `*` version picks it: the group's
/// preferred version when it serves the resource, else the most stable one that does.
pub(crate) async fn discover(client: &Client) -> Result<Vec<Discovered>, kube::Error> {
    let discovery = Discovery::new(client.clone()).run().await?;
    let mut found = Vec::new();
    for group in discovery.groups() {
        let preferred = group.preferred_version_or_latest();
        let mut picked: HashMap<String, &str> = HashMap::new();
        for version in group.versions() {
            for (resource, _) in group.versioned_resources(version) {
                let better = match picked.get(&resource.plural) {
                    None => true,
                    Some(&current) => {
                        current != preferred
                            && (version == preferred
                                || Version::parse(version).priority()
                                    > Version::parse(current).priority())
                    }
                };
                if better {
                    picked.insert(resource.plural, version);
                }
            }
        }
        for version in group.versions() {
            for (resource, capabilities) in group.versioned_resources(version) {
                let preferred = picked.get(&resource.plural) == Some(&version);
                found.push(Discovered {
                    resource,
                    capabilities,
                    preferred,
                });
            }
        }
    }
    Ok(found)
}
