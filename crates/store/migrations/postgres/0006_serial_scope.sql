-- Serials (docs/api.md, "Management endpoints"): unique among provisioned gateways, and an
-- asset's unique among the children of its gateway, so that an asset announced in one group
-- never blocks provisioning a gateway of that serial in another.
DROP INDEX physical_devices_serial;
CREATE UNIQUE INDEX physical_devices_serial ON physical_devices (serial_hardware)
    WHERE archived_at IS NULL AND id_parent IS NULL;
CREATE UNIQUE INDEX physical_devices_child_serial ON physical_devices (id_parent, serial_hardware)
    WHERE archived_at IS NULL AND id_parent IS NOT NULL;
