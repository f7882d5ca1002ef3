-- Device twins (docs/api.md, "Twins"): every physical device has one row, made with the device by
-- the trigger below (and here for the devices that exist). `desired` and `reported` are JSON
-- object texts; `in_sync` is worked out by the service at every change (the delta needs the
-- documents), so the collection can filter on it.
CREATE TABLE twins (
    id_physical_device   TEXT PRIMARY KEY NOT NULL REFERENCES physical_devices (id_physical_device),
    id_group             TEXT NOT NULL,
    desired              TEXT NOT NULL DEFAULT '{}',
    reported             TEXT NOT NULL DEFAULT '{}',
    version              BIGINT NOT NULL DEFAULT 0,
    reported_version     BIGINT,
    desired_updated_at   BIGINT,
    reported_updated_at  BIGINT,
    in_sync              BIGINT NOT NULL DEFAULT 1,
    -- Counts every change of either document: a change is written only over the revision it
    -- was computed from (compare and set), so `in_sync` always matches both documents.
    revision             BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX twins_group ON twins (id_group, id_physical_device);
CREATE INDEX twins_out_of_sync ON twins (in_sync, id_group);

INSERT INTO twins (id_physical_device, id_group)
SELECT id_physical_device, id_group FROM physical_devices;

CREATE FUNCTION physical_devices_twin() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO twins (id_physical_device, id_group) VALUES (NEW.id_physical_device, NEW.id_group);
    RETURN NULL;
END $$;

CREATE TRIGGER physical_devices_twin AFTER INSERT ON physical_devices
FOR EACH ROW EXECUTE FUNCTION physical_devices_twin();
