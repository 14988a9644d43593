//! `[[pods]]`: the pods of this node, watched through the Kubernetes API
//! (kube-rs: a list, then a watch resumed from it, with kube's backoff on
//! errors; the field selector `spec.nodeName=NODE` keeps it to this node).
//! The client is configured as kubectl's: in a pod from its service
//! account, elsewhere from `$KUBECONFIG` or `~/.kube/config`.  Each change
//! of a pod's labels, namespace or QoS class sends the node's whole list to
//! the main loop, which binds the cgroups the entries select now
//! (`crate::bind::config::with_pods`).

use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::{watcher, WatchStreamExt};
use tokio::sync::mpsc;

use super::State;
use crate::bind::config::Desired;
use crate::bind::pods::PodInfo;

/// What the daemon keeps of a pod.
fn info(p: &Pod) -> Option<PodInfo> {
    let m = &p.metadata;
    Some(PodInfo {
        uid: m.uid.clone()?,
        namespace: m.namespace.clone().unwrap_or_default(),
        labels: m.labels.clone().unwrap_or_default(),
        qos: p
            .status
            .as_ref()
            .and_then(|s| s.qos_class.as_deref())
            .and_then(|q| q.parse().ok()),
    })
}

/// The watch task of the node in the config, if it has `[[pods]]`.
#[derive(Default)]
pub(super) struct PodWatch {
    node: Option<String>,
    task: Option<tokio::task::JoinHandle<()>>,
    rx: Option<mpsc::UnboundedReceiver<Vec<PodInfo>>>,
}

impl PodWatch {
    pub fn new() -> PodWatch {
        PodWatch::default()
    }

    /// Watch the node `d` names when it has `[[pods]]` or rollouts in
    /// pods; stop otherwise.
    pub fn sync(&mut self, d: &Desired, st: &Rc<State>) {
        let want = (!d.pods.is_empty() || !d.pod_rollouts.is_empty())
            .then(|| d.serve.node_name.clone())
            .flatten();
        if want == self.node && (want.is_none() || self.task.is_some()) {
            return;
        }
        if let Some(t) = self.task.take() {
            t.abort();
        }
        self.rx = None;
        *st.pods.borrow_mut() = None;
        self.node = want.clone();
        let Some(node) = want else { return };
        let (tx, rx) = mpsc::unbounded_channel();
        self.rx = Some(rx);
        self.task = Some(tokio::task::spawn_local(watch(node, tx, st.clone())));
    }

    /// The node's pods, when they change (never without `[[pods]]`).
    pub async fn changed(&mut self) -> Vec<PodInfo> {
        match &mut self.rx {
            Some(rx) => match rx.recv().await {
                Some(v) => v,
                None => std::future::pending().await,
            },
            None => std::future::pending().await,
        }
    }
}

async fn watch(node: String, tx: mpsc::UnboundedSender<Vec<PodInfo>>, st: Rc<State>) {
    let client = loop {
        match kube::Client::try_default().await {
            Ok(c) => break c,
            Err(e) => {
                st.metrics.borrow_mut().pod_watch_errors += 1;
                tracing::warn!(error = %e, "pods: no Kubernetes API client ({e}); trying again in 10 s");
                tokio::time::sleep(Duration::from_secs(10)).await;
            }
        }
    };
    let api: kube::Api<Pod> = kube::Api::all(client);
    let cfg = watcher::Config::default().fields(&format!("spec.nodeName={node}"));
    let mut events = Box::pin(watcher(api, cfg).default_backoff());
    let mut pods: BTreeMap<String, PodInfo> = BTreeMap::new();
    let mut listing: BTreeMap<String, PodInfo> = BTreeMap::new();
    let mut sent: Option<BTreeMap<String, PodInfo>> = None;
    tracing::info!(node = %node, "pods: watching the pods of node {node}");
    while let Some(ev) = events.next().await {
        match ev {
            Ok(watcher::Event::Init) => listing.clear(),
            Ok(watcher::Event::InitApply(p)) => {
                if let Some(i) = info(&p) {
                    listing.insert(i.uid.clone(), i);
                }
            }
            Ok(watcher::Event::InitDone) => pods = std::mem::take(&mut listing),
            Ok(watcher::Event::Apply(p)) => {
                if let Some(i) = info(&p) {
                    pods.insert(i.uid.clone(), i);
                }
            }
            Ok(watcher::Event::Delete(p)) => {
                if let Some(uid) = &p.metadata.uid {
                    pods.remove(uid);
                }
            }
            Err(e) => {
                st.metrics.borrow_mut().pod_watch_errors += 1;
                tracing::warn!(error = %e, "pods: watch: {e}");
                continue;
            }
        }
        // Only a change the bindings can see goes on (status updates do
        // not, but for the QoS class they carry).
        if sent.as_ref() != Some(&pods) {
            sent = Some(pods.clone());
            if tx.send(pods.values().cloned().collect()).is_err() {
                return;
            }
        }
    }
}
