{{/*
The server's pod template, shared by the StatefulSet (sled: one replica, its store on a volume)
and the Deployment (etcd3: several replicas, no volume).
*/}}
{{- define "crd-apiserver.podTemplate" -}}
{{- $etcd := eq .Values.storage.backend "etcd3" -}}
metadata:
  labels:
    {{- include "crd-apiserver.selectorLabels" . | nindent 4 }}
spec:
  serviceAccountName: {{ include "crd-apiserver.serviceAccountName" . }}
  terminationGracePeriodSeconds: {{ .Values.shutdown.terminationGracePeriodSeconds }}
  {{- with .Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    {{- toYaml .Values.podSecurityContext | nindent 4 }}
  containers:
    - name: crd-apiserver
      image: "{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}"
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      args:
        - serve
        - --secure-port={{ .Values.securePort }}
        - --tls-cert-file=/etc/crd-apiserver/tls/tls.crt
        - --tls-private-key-file=/etc/crd-apiserver/tls/tls.key
        {{- if $etcd }}
        - --storage-backend=etcd3
        - --etcd-servers={{ join "," .Values.storage.etcd.servers }}
        - --etcd-prefix={{ .Values.storage.etcd.prefix }}
        - --etcd-compaction-interval={{ .Values.storage.etcd.compactionInterval }}
        {{- with .Values.storage.etcd.clientCertSecret }}
        - --etcd-cafile=/etc/crd-apiserver/etcd/ca.crt
        - --etcd-certfile=/etc/crd-apiserver/etcd/tls.crt
        - --etcd-keyfile=/etc/crd-apiserver/etcd/tls.key
        {{- end }}
        {{- else }}
        - --storage=/var/lib/crd-apiserver
        {{- end }}
        - --definitions=/etc/crd-apiserver/definitions
        - --shutdown-delay-duration={{ .Values.shutdown.delay }}
        {{- with .Values.clusterDefinitions.selector }}
        - {{ printf "--cluster-definitions-selector=%s" . | quote }}
        {{- end }}
        {{- with .Values.clusterDefinitions.names }}
        - --cluster-definitions={{ join "," . }}
        {{- end }}
        {{- if .Values.takeover.rbac }}
        - --takeover-service={{ .Release.Namespace }}/{{ include "crd-apiserver.fullname" . }}
        - --takeover-ca-file=/etc/crd-apiserver/tls/ca.crt
        {{- end }}
        {{- if .Values.takeover.automatic }}
        - --takeover-cluster-definitions
        {{- end }}
        {{- if ne .Values.apiService.openAPIV2 "full" }}
        - --openapi-v2={{ .Values.apiService.openAPIV2 }}
        {{- end }}
        {{- range .Values.extraArgs }}
        - {{ . | quote }}
        {{- end }}
      ports:
        - name: https
          containerPort: {{ .Values.securePort }}
      securityContext:
        allowPrivilegeEscalation: false
        readOnlyRootFilesystem: true
        capabilities:
          drop: ["ALL"]
      livenessProbe:
        httpGet:
          path: /livez
          port: https
          scheme: HTTPS
        periodSeconds: 10
        failureThreshold: 6
      # /readyz fails while the replica cannot reach its store (etcd: the `etcd` check), so
      # the Service and kube-aggregator send its requests to the other replicas meanwhile.
      readinessProbe:
        httpGet:
          path: /readyz
          port: https
          scheme: HTTPS
        periodSeconds: 2
        failureThreshold: 3
      resources:
        {{- toYaml .Values.resources | nindent 8 }}
      volumeMounts:
        {{- if not $etcd }}
        - name: data
          mountPath: /var/lib/crd-apiserver
        {{- end }}
        {{- if and $etcd .Values.storage.etcd.clientCertSecret }}
        - name: etcd-client
          mountPath: /etc/crd-apiserver/etcd
          readOnly: true
        {{- end }}
        # A ConfigMap volume: kubelet swaps its ..data link when the ConfigMap changes and the
        # server serves the new definitions live, without a restart.
        - name: definitions
          mountPath: /etc/crd-apiserver/definitions
          readOnly: true
        - name: serving-cert
          mountPath: /etc/crd-apiserver/tls
          readOnly: true
  {{- with .Values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- $affinity := deepCopy .Values.affinity -}}
  {{- if and $etcd (gt (int .Values.replicas) 1) (not $affinity.podAntiAffinity) (ne .Values.highAvailability.podAntiAffinity "none") }}
  {{- $term := dict "topologyKey" "kubernetes.io/hostname" "labelSelector" (dict "matchLabels" (include "crd-apiserver.selectorLabels" . | fromYaml)) -}}
  {{- if eq .Values.highAvailability.podAntiAffinity "hard" }}
  {{- $_ := set $affinity "podAntiAffinity" (dict "requiredDuringSchedulingIgnoredDuringExecution" (list $term)) -}}
  {{- else }}
  {{- $_ := set $affinity "podAntiAffinity" (dict "preferredDuringSchedulingIgnoredDuringExecution" (list (dict "weight" 100 "podAffinityTerm" $term))) -}}
  {{- end }}
  {{- end }}
  {{- with $affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- if and $etcd (gt (int .Values.replicas) 1) }}
  {{- with .Values.highAvailability.topologySpreadConstraints }}
  topologySpreadConstraints:
    {{- toYaml . | nindent 4 }}
  {{- else }}
  # Replicas spread over zones where the nodes have them (ScheduleAnyway: a cluster with one
  # zone still schedules every replica).
  topologySpreadConstraints:
    - maxSkew: 1
      topologyKey: topology.kubernetes.io/zone
      whenUnsatisfiable: ScheduleAnyway
      labelSelector:
        matchLabels:
          {{- include "crd-apiserver.selectorLabels" . | nindent 10 }}
  {{- end }}
  {{- end }}
  volumes:
    - name: definitions
      configMap:
        name: {{ include "crd-apiserver.fullname" . }}-definitions
    - name: serving-cert
      secret:
        secretName: {{ include "crd-apiserver.fullname" . }}-serving
    {{- if and $etcd .Values.storage.etcd.clientCertSecret }}
    - name: etcd-client
      secret:
        secretName: {{ .Values.storage.etcd.clientCertSecret }}
    {{- end }}
    {{- if and (not $etcd) (not .Values.persistence.enabled) }}
    - name: data
      emptyDir: {}
    {{- end }}
{{- end -}}

{{/* Refuses values that cannot run: sled is one replica on one volume; etcd3 needs servers;
an automatic takeover needs its permissions and definitions from the cluster. */}}
{{- define "crd-apiserver.checkValues" -}}
{{- if .Values.takeover.automatic -}}
{{- if not .Values.takeover.rbac -}}
{{- fail "takeover.automatic needs takeover.rbac=true (and takeover.groups): a takeover switches APIServices and freezes writes" -}}
{{- end -}}
{{- if not (include "crd-apiserver.clusterDefinitions" .) -}}
{{- fail "takeover.automatic takes over the definitions clusterDefinitions selects: set clusterDefinitions.selector or clusterDefinitions.names" -}}
{{- end -}}
{{- end -}}
{{- if eq .Values.storage.backend "etcd3" -}}
{{- if not .Values.storage.etcd.servers -}}
{{- fail "storage.backend=etcd3 needs storage.etcd.servers (e.g. --set 'storage.etcd.servers={https://etcd-0.etcd:2379}')" -}}
{{- end -}}
{{- else if gt (int .Values.replicas) 1 -}}
{{- fail (printf "replicas=%d needs storage.backend=etcd3: the sled store lives on one pod's volume, so it runs one replica" (int .Values.replicas)) -}}
{{- end -}}
{{- end -}}
