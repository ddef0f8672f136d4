"""Key names whose values are sensitive: data shared by the redactor (:mod:`.scrub`, :mod:`.allowlist`)
and the leak scan, so that none of them imports another for it.

A JSON key or a column named one of these (after lower-casing and dropping every character that is
not a letter or digit: ``host_name`` -> ``hostname``) holds a value of that kind as a whole.
"""

from __future__ import annotations

#: Normalised key names by the kind of value they hold.
KEYS_BY_KIND: dict[str, str] = {
    "host": "host hostname hosts hostnames node nodename nodes server servers machine machinename fqdn",
    "ip": "ip ipaddress ipaddr addr address",
    "user": "user username userid owner login author uid",
    "email": "email mail",
    "secret": "password passwd pwd token apitoken accesstoken authtoken secret apikey accesskey secretkey "
    "privatekey credentials credential auth authorization cookie session sessionid",
    "path": "cwd home homedir workdir directory dir path file filename filepath dataset datadir datapath "
    "checkpoint outputdir logdir",
}
#: JSON keys whose whole (string) value is sensitive, by normalised key -> kind.
SENSITIVE_KEYS: dict[str, str] = {key: kind for kind, keys in KEYS_BY_KIND.items() for key in keys.split()}
