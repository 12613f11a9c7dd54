"""The messages the protobuf codec knows: one table per message type.

Each field is `number:jsonName:kind` plus flags, from the Go struct tags of k8s.io/api
(core/v1, apps/v1, rbac/v1, authorization/v1, authentication/v1) and k8s.io/apimachinery
(meta/v1), whose `protobuf:"...,N,..."` numbers are those of the generated.proto files. A kind
is a scalar (`string`, `bool`, `int32`, `int64`, `bytes`), a special message with its own JSON
form (`Time`, `IntOrString`, `Quantity`, `ExtraValue`: a list of strings wrapped in a
message) or another table; `[kind]` is a repeated field, `{kind}` a map from string keys.
Flags: `?` a Go pointer (present when set, even to a zero value), `!` a field Go's JSON keeps
when empty (no omitempty), `^` a struct embedded inline in the JSON (json name `-` here).
Fields of other types (volumes, probes, affinity, security contexts, managedFields, ...) are
not in the tables: decoding skips them, encoding refuses them (the answer is then JSON).
"""

from __future__ import annotations

from dataclasses import dataclass

SCALARS = frozenset({"string", "bool", "int32", "int64", "bytes"})
SPECIAL = frozenset({"Time", "IntOrString", "Quantity", "ExtraValue"})


@dataclass(frozen=True)
class Field:
    number: int
    name: str  # the JSON name; "" for an inline struct
    kind: str
    repeated: bool = False
    map: bool = False
    pointer: bool = False
    keep: bool = False

    @property
    def inline(self) -> bool:
        return not self.name


@dataclass(frozen=True)
class Message:
    name: str
    fields: tuple[Field, ...]  # by field number

    def by_number(self) -> dict[int, Field]:
        return {f.number: f for f in self.fields}


def _field(spec: str) -> Field:
    number, name, kind = spec.split(":")
    flags = ""
    while kind[-1] in "?!^":
        kind, flags = kind[:-1], flags + kind[-1]
    repeated, is_map = kind.startswith("["), kind.startswith("{")
    if repeated or is_map:
        kind = kind[1:-1]
    return Field(
        number=int(number),
        name="" if "^" in flags else name,
        kind=kind,
        repeated=repeated,
        map=is_map,
        pointer="?" in flags,
        keep="!" in flags,
    )


def _f(spec: str) -> tuple[Field, ...]:
    return tuple(sorted((_field(s) for s in spec.split()), key=lambda f: f.number))


_TABLES: dict[str, tuple[Field, ...]] = {
    "ObjectMeta": _f(
        "1:name:string 2:generateName:string 3:namespace:string 4:selfLink:string 5:uid:string "
        "6:resourceVersion:string 7:generation:int64 8:creationTimestamp:Time "
        "9:deletionTimestamp:Time? 10:deletionGracePeriodSeconds:int64? 11:labels:{string} "
        "12:annotations:{string} 13:ownerReferences:[OwnerReference] 14:finalizers:[string]"
    ),
    "ListMeta": _f(
        "1:selfLink:string 2:resourceVersion:string 3:continue:string 4:remainingItemCount:int64?"
    ),
    "OwnerReference": _f(
        "5:apiVersion:string! 1:kind:string! 3:name:string! 4:uid:string! 6:controller:bool? "
        "7:blockOwnerDeletion:bool?"
    ),
    "LabelSelector": _f("1:matchLabels:{string} 2:matchExpressions:[LabelSelectorRequirement]"),
    "LabelSelectorRequirement": _f("1:key:string! 2:operator:string! 3:values:[string]"),
    "Status": _f(
        "1:metadata:ListMeta 2:status:string 3:message:string 4:reason:string "
        "5:details:StatusDetails? 6:code:int32"
    ),
    "StatusDetails": _f(
        "1:name:string 2:group:string 3:kind:string 6:uid:string 4:causes:[StatusCause] "
        "5:retryAfterSeconds:int32"
    ),
    "DeleteOptions": _f(
        "1:gracePeriodSeconds:int64? 2:preconditions:Preconditions? 3:orphanDependents:bool? "
        "4:propagationPolicy:string? 5:dryRun:[string] "
        "6:ignoreStoreReadErrorWithClusterBreakingPotential:bool?"
    ),
    "Preconditions": _f("1:uid:string? 2:resourceVersion:string?"),
    "StatusCause": _f("1:reason:string 2:message:string 3:field:string"),
    "Condition": _f(
        "1:type:string! 2:status:string! 3:observedGeneration:int64 4:lastTransitionTime:Time! "
        "5:reason:string! 6:message:string!"
    ),
    "Namespace": _f("1:metadata:ObjectMeta 2:spec:NamespaceSpec 3:status:NamespaceStatus"),
    "NamespaceSpec": _f("1:finalizers:[string]"),
    "NamespaceStatus": _f("1:phase:string 2:conditions:[NamespaceCondition]"),
    "NamespaceCondition": _f(
        "1:type:string! 2:status:string! 4:lastTransitionTime:Time 5:reason:string 6:message:string"
    ),
    "ConfigMap": _f("1:metadata:ObjectMeta 4:immutable:bool? 2:data:{string} 3:binaryData:{bytes}"),
    "Secret": _f(
        "1:metadata:ObjectMeta 5:immutable:bool? 2:data:{bytes} 4:stringData:{string} 3:type:string"
    ),
    "Service": _f("1:metadata:ObjectMeta 2:spec:ServiceSpec 3:status:ServiceStatus"),
    "ServiceSpec": _f(
        "1:ports:[ServicePort] 2:selector:{string} 3:clusterIP:string 18:clusterIPs:[string] "
        "4:type:string 5:externalIPs:[string] 7:sessionAffinity:string 8:loadBalancerIP:string "
        "9:loadBalancerSourceRanges:[string] 10:externalName:string "
        "11:externalTrafficPolicy:string 12:healthCheckNodePort:int32 "
        "13:publishNotReadyAddresses:bool 14:sessionAffinityConfig:SessionAffinityConfig? "
        "19:ipFamilies:[string] 17:ipFamilyPolicy:string? "
        "20:allocateLoadBalancerNodePorts:bool? 21:loadBalancerClass:string? "
        "22:internalTrafficPolicy:string? 23:trafficDistribution:string?"
    ),
    "ServicePort": _f(
        "1:name:string 2:protocol:string 6:appProtocol:string? 3:port:int32! "
        "4:targetPort:IntOrString 5:nodePort:int32"
    ),
    "ServiceStatus": _f("1:loadBalancer:LoadBalancerStatus 2:conditions:[Condition]"),
    "LoadBalancerStatus": _f("1:ingress:[LoadBalancerIngress]"),
    "LoadBalancerIngress": _f(
        "1:ip:string 2:hostname:string 3:ipMode:string? 4:ports:[PortStatus]"
    ),
    "PortStatus": _f("1:port:int32! 2:protocol:string! 3:error:string?"),
    "SessionAffinityConfig": _f("1:clientIP:ClientIPConfig?"),
    "ClientIPConfig": _f("1:timeoutSeconds:int32?"),
    "ServiceAccount": _f(
        "1:metadata:ObjectMeta 2:secrets:[ObjectReference] "
        "3:imagePullSecrets:[LocalObjectReference] 4:automountServiceAccountToken:bool?"
    ),
    "ObjectReference": _f(
        "1:kind:string 2:namespace:string 3:name:string 4:uid:string 5:apiVersion:string "
        "6:resourceVersion:string 7:fieldPath:string"
    ),
    "LocalObjectReference": _f("1:name:string"),
    "PodTemplateSpec": _f("1:metadata:ObjectMeta 2:spec:PodSpec"),
    "PodSpec": _f(
        "20:initContainers:[Container] 2:containers:[Container]! 3:restartPolicy:string "
        "4:terminationGracePeriodSeconds:int64? 5:activeDeadlineSeconds:int64? "
        "6:dnsPolicy:string 7:nodeSelector:{string} 8:serviceAccountName:string "
        "9:serviceAccount:string 21:automountServiceAccountToken:bool? 10:nodeName:string "
        "11:hostNetwork:bool 12:hostPID:bool 13:hostIPC:bool 27:shareProcessNamespace:bool? "
        "15:imagePullSecrets:[LocalObjectReference] 16:hostname:string 17:subdomain:string "
        "19:schedulerName:string 22:tolerations:[Toleration] 24:priorityClassName:string "
        "25:priority:int32? 29:runtimeClassName:string? 30:enableServiceLinks:bool? "
        "31:preemptionPolicy:string? 32:overhead:{Quantity} 35:setHostnameAsFQDN:bool? "
        "37:hostUsers:bool? 40:resources:ResourceRequirements? 41:hostnameOverride:string?"
    ),
    "Container": _f(
        "1:name:string! 2:image:string 3:command:[string] 4:args:[string] 5:workingDir:string "
        "6:ports:[ContainerPort] 19:envFrom:[EnvFromSource] 7:env:[EnvVar] "
        "8:resources:ResourceRequirements 24:restartPolicy:string? "
        "9:volumeMounts:[VolumeMount] 13:terminationMessagePath:string "
        "20:terminationMessagePolicy:string 14:imagePullPolicy:string 16:stdin:bool "
        "17:stdinOnce:bool 18:tty:bool"
    ),
    "ContainerPort": _f(
        "1:name:string 2:hostPort:int32 3:containerPort:int32! 4:protocol:string 5:hostIP:string"
    ),
    "EnvVar": _f("1:name:string! 2:value:string 3:valueFrom:EnvVarSource?"),
    "EnvVarSource": _f(
        "1:fieldRef:ObjectFieldSelector? 2:resourceFieldRef:ResourceFieldSelector? "
        "3:configMapKeyRef:ConfigMapKeySelector? 4:secretKeyRef:SecretKeySelector?"
    ),
    "ConfigMapKeySelector": _f("1:-:LocalObjectReference^ 2:key:string! 3:optional:bool?"),
    "SecretKeySelector": _f("1:-:LocalObjectReference^ 2:key:string! 3:optional:bool?"),
    "ObjectFieldSelector": _f("1:apiVersion:string 2:fieldPath:string!"),
    "ResourceFieldSelector": _f("1:containerName:string 2:resource:string! 3:divisor:Quantity"),
    "EnvFromSource": _f(
        "1:prefix:string 2:configMapRef:ConfigMapEnvSource? 3:secretRef:SecretEnvSource?"
    ),
    "ConfigMapEnvSource": _f("1:-:LocalObjectReference^ 2:optional:bool?"),
    "SecretEnvSource": _f("1:-:LocalObjectReference^ 2:optional:bool?"),
    "ResourceRequirements": _f(
        "1:limits:{Quantity} 2:requests:{Quantity} 3:claims:[ResourceClaim]"
    ),
    "ResourceClaim": _f("1:name:string! 2:request:string"),
    "VolumeMount": _f(
        "1:name:string! 2:readOnly:bool 7:recursiveReadOnly:string? 3:mountPath:string! "
        "4:subPath:string 5:mountPropagation:string? 6:subPathExpr:string "
        "8:bindMountOptions:[string]"
    ),
    "Toleration": _f(
        "1:key:string 2:operator:string 3:value:string 4:effect:string 5:tolerationSeconds:int64?"
    ),
    "Pod": _f("1:metadata:ObjectMeta 2:spec:PodSpec"),
    "Deployment": _f("1:metadata:ObjectMeta 2:spec:DeploymentSpec 3:status:DeploymentStatus"),
    "DeploymentSpec": _f(
        "1:replicas:int32? 2:selector:LabelSelector!? 3:template:PodTemplateSpec! "
        "4:strategy:DeploymentStrategy 5:minReadySeconds:int32 6:revisionHistoryLimit:int32? "
        "7:paused:bool 9:progressDeadlineSeconds:int32?"
    ),
    "DeploymentStrategy": _f("1:type:string 2:rollingUpdate:RollingUpdateDeployment?"),
    "RollingUpdateDeployment": _f("1:maxUnavailable:IntOrString? 2:maxSurge:IntOrString?"),
    "DeploymentStatus": _f(
        "1:observedGeneration:int64 2:replicas:int32 3:updatedReplicas:int32 "
        "7:readyReplicas:int32 4:availableReplicas:int32 5:unavailableReplicas:int32 "
        "9:terminatingReplicas:int32? 6:conditions:[DeploymentCondition] "
        "8:collisionCount:int32?"
    ),
    "DeploymentCondition": _f(
        "1:type:string! 2:status:string! 6:lastUpdateTime:Time 7:lastTransitionTime:Time "
        "4:reason:string 5:message:string"
    ),
    "Role": _f("1:metadata:ObjectMeta 2:rules:[PolicyRule]!"),
    "ClusterRole": _f(
        "1:metadata:ObjectMeta 2:rules:[PolicyRule]! 3:aggregationRule:AggregationRule?"
    ),
    "RoleBinding": _f("1:metadata:ObjectMeta 2:subjects:[Subject] 3:roleRef:RoleRef!"),
    "ClusterRoleBinding": _f("1:metadata:ObjectMeta 2:subjects:[Subject] 3:roleRef:RoleRef!"),
    "PolicyRule": _f(
        "1:verbs:[string]! 2:apiGroups:[string] 3:resources:[string] 4:resourceNames:[string] "
        "5:nonResourceURLs:[string]"
    ),
    "Subject": _f("1:kind:string! 2:apiGroup:string 3:name:string! 4:namespace:string"),
    "RoleRef": _f("1:apiGroup:string! 2:kind:string! 3:name:string!"),
    "AggregationRule": _f("1:clusterRoleSelectors:[LabelSelector]"),
    # authorization.k8s.io/v1 and authentication.k8s.io/v1: `kubectl auth can-i`, `whoami`
    "SelfSubjectAccessReview": _f(
        "1:metadata:ObjectMeta 2:spec:SelfSubjectAccessReviewSpec! "
        "3:status:SubjectAccessReviewStatus"
    ),
    "SelfSubjectAccessReviewSpec": _f(
        "1:resourceAttributes:ResourceAttributes? 2:nonResourceAttributes:NonResourceAttributes?"
    ),
    "ResourceAttributes": _f(
        "1:namespace:string 2:verb:string 3:group:string 4:version:string 5:resource:string "
        "6:subresource:string 7:name:string 8:fieldSelector:FieldSelectorAttributes? "
        "9:labelSelector:LabelSelectorAttributes?"
    ),
    "FieldSelectorAttributes": _f("1:rawSelector:string 2:requirements:[FieldSelectorRequirement]"),
    "LabelSelectorAttributes": _f("1:rawSelector:string 2:requirements:[LabelSelectorRequirement]"),
    "FieldSelectorRequirement": _f("1:key:string! 2:operator:string! 3:values:[string]"),
    "NonResourceAttributes": _f("1:path:string 2:verb:string"),
    "SubjectAccessReviewStatus": _f(
        "1:allowed:bool! 4:denied:bool 2:reason:string 3:evaluationError:string"
    ),
    "SelfSubjectReview": _f("1:metadata:ObjectMeta 2:status:SelfSubjectReviewStatus"),
    "SelfSubjectReviewStatus": _f("1:userInfo:UserInfo"),
    "UserInfo": _f("1:username:string 2:uid:string 3:groups:[string] 4:extra:{ExtraValue}"),
}

_CORE = "Namespace ConfigMap Secret Service ServiceAccount Pod"
_RBAC = "Role ClusterRole RoleBinding ClusterRoleBinding"
_TOP = {"v1": _CORE, "apps/v1": "Deployment", "rbac.authorization.k8s.io/v1": _RBAC}
for _kinds in _TOP.values():  # every Kubernetes list: {1: metadata ListMeta, 2: items}
    for _kind in _kinds.split():
        _TABLES[f"{_kind}List"] = _f(f"1:metadata:ListMeta 2:items:[{_kind}]!")

MESSAGES: dict[str, Message] = {name: Message(name, fields) for name, fields in _TABLES.items()}

# (apiVersion, kind) -> message: the objects and lists that travel in protobuf.
KINDS: dict[tuple[str, str], Message] = {
    ("v1", "Status"): MESSAGES["Status"],
    ("v1", "DeleteOptions"): MESSAGES["DeleteOptions"],
    ("meta.k8s.io/v1", "DeleteOptions"): MESSAGES["DeleteOptions"],
}
# resource -> (apiVersion, kind); each resource is the kind's lowercase plural
PLURALS: dict[str, tuple[str, str]] = {}
for _api_version, _kinds in _TOP.items():
    for _kind in _kinds.split():
        KINDS[_api_version, _kind] = MESSAGES[_kind]
        KINDS[_api_version, f"{_kind}List"] = MESSAGES[f"{_kind}List"]
        PLURALS[f"{_kind.lower()}s"] = (_api_version, _kind)
# the reviews are create-only: no lists
for _api_version, _kind in (
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"),
    ("authentication.k8s.io/v1", "SelfSubjectReview"),
):
    KINDS[_api_version, _kind] = MESSAGES[_kind]
    PLURALS[f"{_kind.lower()}s"] = (_api_version, _kind)


def _check() -> None:
    """Every kind a table names is a scalar, a special message or another table."""
    for msg in MESSAGES.values():
        for f in msg.fields:
            if f.kind not in SCALARS | SPECIAL and f.kind not in MESSAGES:
                raise AssertionError(f"{msg.name}.{f.name}: unknown kind {f.kind}")


_check()
