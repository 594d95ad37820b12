//! Which host paths expose the container runtime's socket.

/// The runtimes' API sockets, under both `/var/run` and `/run`: on most distributions one
/// links to the other, but either may be the real directory.
const RUNTIME_SOCKETS: &[&str] = &[
    "/var/run/docker.sock",
    "/run/docker.sock",
    "/var/run/containerd/containerd.sock",
    "/run/containerd/containerd.sock",
    "/var/run/crio/crio.sock",
    "/run/crio/crio.sock",
    "/var/run/cri-dockerd.sock",
    "/run/cri-dockerd.sock",
    "/var/run/dockershim.sock",
    "/run/dockershim.sock",
    "/var/run/podman/podman.sock",
    "/run/podman/podman.sock",
    "/run/k3s/containerd/containerd.sock",
    "/var/snap/microk8s/common/run/containerd.sock",
];

/// Whether mounting `path` exposes a runtime socket: it is one, or a directory above one
/// (`/`, `/var/run`, `/run/containerd`).
pub(crate) fn exposes_runtime_socket(path: &str) -> bool {
    let mounted = components(path);
    RUNTIME_SOCKETS
        .iter()
        .any(|socket| components(socket).starts_with(&mounted))
}

/// `path` as components, with `.`, `..` and repeated or trailing slashes resolved the
/// way the kubelet's cleaned path would be.
fn components(path: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            _ => parts.push(part),
        }
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sockets_and_their_directories() {
        for path in [
            "/var/run/docker.sock",
            "/run/containerd/containerd.sock",
            "/var/run/crio/crio.sock",
            "/var/run/crio",
            "/var/run/",
            "/run",
            "/var",
            "/",
            "//var//run/./docker.sock/",
            "/var/lib/../run/docker.sock",
        ] {
            assert!(exposes_runtime_socket(path), "{path}");
        }
        for path in [
            "/var/log",
            "/var/run/docker.sock.bak",
            "/run/containerd-other",
            "/etc/kubernetes",
            "/var/lib/docker",
        ] {
            assert!(!exposes_runtime_socket(path), "{path}");
        }
    }
}
