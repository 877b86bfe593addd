package deploy

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// The cert-manager (cert-manager.io/v1) kinds the manifests use, as far as
// they use them. Their JSON names are cert-manager's; decodeStrict refuses
// any field not declared here, so a field the manifests start using is
// added here first, checked against cert-manager's API reference.

// certificate is a cert-manager Certificate.
type certificate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              certificateSpec `json:"spec"`
}

type certificateSpec struct {
	SecretName  string                 `json:"secretName"`
	CommonName  string                 `json:"commonName,omitempty"`
	Subject     *certificateSubject    `json:"subject,omitempty"`
	DNSNames    []string               `json:"dnsNames,omitempty"`
	IPAddresses []string               `json:"ipAddresses,omitempty"`
	URIs        []string               `json:"uris,omitempty"`
	Usages      []string               `json:"usages,omitempty"`
	Duration    string                 `json:"duration,omitempty"`
	RenewBefore string                 `json:"renewBefore,omitempty"`
	IsCA        bool                   `json:"isCA,omitempty"`
	PrivateKey  *certificatePrivateKey `json:"privateKey,omitempty"`
	IssuerRef   issuerReference        `json:"issuerRef"`
}

type certificateSubject struct {
	Organizations       []string `json:"organizations,omitempty"`
	OrganizationalUnits []string `json:"organizationalUnits,omitempty"`
}

type certificatePrivateKey struct {
	Algorithm      string `json:"algorithm,omitempty"`
	Size           int    `json:"size,omitempty"`
	Encoding       string `json:"encoding,omitempty"`
	RotationPolicy string `json:"rotationPolicy,omitempty"`
}

type issuerReference struct {
	Name  string `json:"name"`
	Kind  string `json:"kind,omitempty"`
	Group string `json:"group,omitempty"`
}

// issuer is a cert-manager Issuer of the two types the dev overlay uses.
type issuer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              issuerSpec `json:"spec"`
}

type issuerSpec struct {
	SelfSigned *selfSignedIssuer `json:"selfSigned,omitempty"`
	CA         *caIssuer         `json:"ca,omitempty"`
}

type selfSignedIssuer struct {
	CRLDistributionPoints []string `json:"crlDistributionPoints,omitempty"`
}

type caIssuer struct {
	SecretName string `json:"secretName"`
}
