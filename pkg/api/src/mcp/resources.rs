//! Objects as resources an assistant's user can attach: `karpor://CLUSTER/KIND/NAMESPACE/NAME`
//! (or `karpor://CLUSTER/KIND/NAME` for a cluster-scoped object) reads the object's YAML
//! as stored, through `/insight/detail` like the tools: redacted, within the caller's
//! scope.

use rmcp::model::{
    ListResourceTemplatesResult, ReadResourceResult, ResourceContents, ResourceTemplate,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};

use super::args::Names;
use super::tools::{Karpor, Refused};

const SCHEME: &str = "karpor://";
const YAML: &str = "application/yaml";

impl Karpor {
    pub(super) fn resource_templates() -> ListResourceTemplatesResult {
        let template = |uri: &str, name: &str, what: &str| {
            ResourceTemplate::new(uri, name)
                .with_description(what)
                .with_mime_type(YAML)
        };
        ListResourceTemplatesResult::with_all_items(vec![
            template(
                "karpor://{cluster}/{kind}/{namespace}/{name}",
                "object",
                "A namespaced object's YAML as karpor stores it (Secret values redacted)",
            ),
            template(
                "karpor://{cluster}/{kind}/{name}",
                "cluster-object",
                "A cluster-scoped object's YAML as karpor stores it",
            ),
        ])
    }
}

/// The names a resource URI gives, parsed as the tools parse them.
fn names(uri: &str) -> Result<Names, ErrorData> {
    let not_ours = || {
        ErrorData::resource_not_found(
            format!("{uri:?} is not karpor://CLUSTER/KIND/[NAMESPACE/]NAME"),
            None,
        )
    };
    let path = uri.strip_prefix(SCHEME).ok_or_else(not_ours)?;
    let parts: Vec<&str> = path.split('/').collect();
    match parts[..] {
        [cluster, kind, namespace, name] => {
            Names::parse(Some(cluster), None, Some(kind), Some(namespace), Some(name))
        }
        [cluster, kind, name] => Names::parse(Some(cluster), None, Some(kind), None, Some(name)),
        _ => Err(not_ours()),
    }
}

impl Karpor {
    pub(super) async fn read_object(
        &self,
        uri: String,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResult, ErrorData> {
        let calling = self.calling("resource", &ctx)?;
        let started = std::time::Instant::now();
        let outcome = async {
            let names = names(&uri)?;
            let (names, _) = self.located(&calling, names).await?;
            let mut query = names.query();
            query.push(("format", "yaml".to_owned()));
            let yaml: String = self.get(&calling, "/insight/detail", &query).await?;
            Ok::<_, Refused>(yaml)
        }
        .await;
        let yaml = self.finish_read(&calling, started, outcome)?;
        Ok(ReadResourceResult::new(vec![ResourceContents::text(
            yaml, uri,
        )
        .with_mime_type(YAML)]))
    }
}
