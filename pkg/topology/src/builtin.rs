//! The relations karpor knows without being told, and the rules in force: the built-in
//! ones, each replaced by a stored rule of its name, plus the stored ones; disabled rules
//! left out. Owner references relate every kind (no rule needed).

use karpor_core::model::{KindRef, Relation, RelationRule};

fn rule(
    name: &str,
    parent: (&str, &str),
    child: (&str, &str),
    child_cluster_scoped: bool,
    relation: Relation,
) -> RelationRule {
    RelationRule {
        name: name.to_owned(),
        description: "built-in".to_owned(),
        enabled: true,
        parent: KindRef::new(parent.0, parent.1),
        child: KindRef::new(child.0, child.1),
        child_cluster_scoped,
        relation,
    }
}

fn selector(path: &str) -> Relation {
    Relation::Selector {
        path: path.to_owned(),
    }
}

fn reference(path: &str, name: &str) -> Relation {
    Relation::Reference {
        path: path.to_owned(),
        name: name.to_owned(),
        namespace: String::new(),
        kind: String::new(),
    }
}

/// A reference whose value names the child's kind at `kind` (a scale target, a role).
fn reference_of_kind(path: &str, name: &str, namespace: &str, kind: &str) -> Relation {
    Relation::Reference {
        path: path.to_owned(),
        name: name.to_owned(),
        namespace: namespace.to_owned(),
        kind: kind.to_owned(),
    }
}

const POD: (&str, &str) = ("", "Pod");
const RBAC: &str = "rbac.authorization.k8s.io";

/// Documented in docs/topology.md, one row each.
pub fn builtin_rules() -> Vec<RelationRule> {
    let pod_template = |kind: (&'static str, &'static str)| (kind.0, kind.1);
    let mut rules = vec![
        rule(
            "service-pods",
            ("", "Service"),
            POD,
            false,
            selector("spec.selector"),
        ),
        rule(
            "pdb-pods",
            ("policy", "PodDisruptionBudget"),
            POD,
            false,
            selector("spec.selector.matchLabels"),
        ),
        rule(
            "networkpolicy-pods",
            ("networking.k8s.io", "NetworkPolicy"),
            POD,
            false,
            selector("spec.podSelector.matchLabels"),
        ),
        rule(
            "pod-node",
            POD,
            ("", "Node"),
            true,
            reference("spec", "nodeName"),
        ),
        rule(
            "pod-serviceaccount",
            POD,
            ("", "ServiceAccount"),
            false,
            reference("spec", "serviceAccountName"),
        ),
        rule(
            "pod-pvc",
            POD,
            ("", "PersistentVolumeClaim"),
            false,
            reference("spec.volumes[*].persistentVolumeClaim", "claimName"),
        ),
        rule(
            "pvc-pv",
            ("", "PersistentVolumeClaim"),
            ("", "PersistentVolume"),
            true,
            reference("spec", "volumeName"),
        ),
        rule(
            "ingress-services",
            ("networking.k8s.io", "Ingress"),
            ("", "Service"),
            false,
            reference("spec.rules[*].http.paths[*].backend.service", "name"),
        ),
        rule(
            "ingress-default-service",
            ("networking.k8s.io", "Ingress"),
            ("", "Service"),
            false,
            reference("spec.defaultBackend.service", "name"),
        ),
        rule(
            "rolebinding-role",
            (RBAC, "RoleBinding"),
            (RBAC, "Role"),
            false,
            reference_of_kind("roleRef", "name", "", "kind"),
        ),
        rule(
            "rolebinding-clusterrole",
            (RBAC, "RoleBinding"),
            (RBAC, "ClusterRole"),
            true,
            reference_of_kind("roleRef", "name", "", "kind"),
        ),
        rule(
            "clusterrolebinding-clusterrole",
            (RBAC, "ClusterRoleBinding"),
            (RBAC, "ClusterRole"),
            true,
            reference_of_kind("roleRef", "name", "", "kind"),
        ),
        rule(
            "rolebinding-serviceaccounts",
            (RBAC, "RoleBinding"),
            ("", "ServiceAccount"),
            false,
            reference_of_kind("subjects[*]", "name", "namespace", "kind"),
        ),
        rule(
            "clusterrolebinding-serviceaccounts",
            (RBAC, "ClusterRoleBinding"),
            ("", "ServiceAccount"),
            false,
            reference_of_kind("subjects[*]", "name", "namespace", "kind"),
        ),
    ];
    // What a pod (or a workload's pod template) names: config maps and secrets by volume,
    // by environment and for image pulls.
    let holders: [(&str, (&str, &str), &str); 7] = [
        ("pod", POD, "spec"),
        ("deployment", ("apps", "Deployment"), "spec.template.spec"),
        ("statefulset", ("apps", "StatefulSet"), "spec.template.spec"),
        ("daemonset", ("apps", "DaemonSet"), "spec.template.spec"),
        ("replicaset", ("apps", "ReplicaSet"), "spec.template.spec"),
        ("job", ("batch", "Job"), "spec.template.spec"),
        (
            "cronjob",
            ("batch", "CronJob"),
            "spec.jobTemplate.spec.template.spec",
        ),
    ];
    for (name, kind, spec) in holders {
        let kind = pod_template(kind);
        let configmaps = [
            ("volumes", format!("{spec}.volumes[*].configMap"), "name"),
            (
                "envfrom",
                format!("{spec}.containers[*].envFrom[*].configMapRef"),
                "name",
            ),
            (
                "env",
                format!("{spec}.containers[*].env[*].valueFrom.configMapKeyRef"),
                "name",
            ),
        ];
        for (via, path, key) in configmaps {
            rules.push(rule(
                &format!("{name}-configmaps-{via}"),
                kind,
                ("", "ConfigMap"),
                false,
                reference(&path, key),
            ));
        }
        let secrets = [
            ("volumes", format!("{spec}.volumes[*].secret"), "secretName"),
            (
                "envfrom",
                format!("{spec}.containers[*].envFrom[*].secretRef"),
                "name",
            ),
            (
                "env",
                format!("{spec}.containers[*].env[*].valueFrom.secretKeyRef"),
                "name",
            ),
            ("pull", format!("{spec}.imagePullSecrets[*]"), "name"),
        ];
        for (via, path, key) in secrets {
            rules.push(rule(
                &format!("{name}-secrets-{via}"),
                kind,
                ("", "Secret"),
                false,
                reference(&path, key),
            ));
        }
    }
    for target in [
        ("apps", "Deployment"),
        ("apps", "StatefulSet"),
        ("apps", "ReplicaSet"),
    ] {
        rules.push(rule(
            &format!("hpa-{}", target.1.to_lowercase()),
            ("autoscaling", "HorizontalPodAutoscaler"),
            target,
            false,
            reference_of_kind("spec.scaleTargetRef", "name", "", "kind"),
        ));
    }
    rules
}

/// The rules in force: the built-in ones, each replaced by a stored rule of its name, and
/// the other stored rules; disabled ones left out.
pub fn in_force(stored: &[RelationRule]) -> Vec<RelationRule> {
    let mut rules: Vec<RelationRule> = builtin_rules()
        .into_iter()
        .map(|b| {
            stored
                .iter()
                .find(|s| s.name == b.name)
                .cloned()
                .unwrap_or(b)
        })
        .collect();
    for s in stored {
        if !rules.iter().any(|r| r.name == s.name) {
            rules.push(s.clone());
        }
    }
    rules.retain(|r| r.enabled);
    rules
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpor_core::model::Record;

    #[test]
    fn builtins_are_valid_and_uniquely_named_and_stored_rules_replace_them() {
        let builtins = builtin_rules();
        let mut names: Vec<&str> = builtins.iter().map(|r| r.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), builtins.len());
        for rule in &builtins {
            assert_eq!(rule.validate(), Ok(()), "{}", rule.name);
        }
        let mut off = builtins[0].clone();
        off.enabled = false;
        let mut custom = builtins[1].clone();
        custom.name = "db-secrets".into();
        let rules = in_force(&[off.clone(), custom.clone()]);
        assert!(!rules.iter().any(|r| r.name == off.name));
        assert!(rules.contains(&custom));
        assert_eq!(rules.len(), builtins.len());
    }
}
