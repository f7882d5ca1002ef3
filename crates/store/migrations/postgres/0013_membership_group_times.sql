-- A membership carries its group's creation and deletion times, kept by the triggers below, so
-- that the groups a user may see, their number and their first page in the default order are
-- one range of one index of the user's memberships: a member of 1,000 groups no longer looks
-- every one of them up in `groups` for each page (docs/benchmarks.md, "API").
ALTER TABLE memberships ADD COLUMN group_created_at BIGINT NOT NULL DEFAULT 0;
ALTER TABLE memberships ADD COLUMN group_deleted_at BIGINT;

UPDATE memberships SET group_created_at = g.created_at, group_deleted_at = g.deleted_at
FROM groups g WHERE g.id_group = memberships.id_group;

CREATE INDEX memberships_visible ON memberships (id_user, group_deleted_at, group_created_at, id_group);

CREATE FUNCTION memberships_group_times() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    SELECT created_at, deleted_at INTO NEW.group_created_at, NEW.group_deleted_at
    FROM groups WHERE id_group = NEW.id_group;
    -- No such group: the foreign key refuses the row; NOT NULL must not refuse it first.
    NEW.group_created_at := COALESCE(NEW.group_created_at, 0);
    RETURN NEW;
END $$;

CREATE TRIGGER memberships_group_times BEFORE INSERT ON memberships
FOR EACH ROW EXECUTE FUNCTION memberships_group_times();

CREATE FUNCTION groups_times_to_memberships() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE memberships SET group_created_at = NEW.created_at, group_deleted_at = NEW.deleted_at
    WHERE id_group = NEW.id_group;
    RETURN NULL;
END $$;

CREATE TRIGGER groups_times_to_memberships AFTER UPDATE OF created_at, deleted_at ON groups
FOR EACH ROW EXECUTE FUNCTION groups_times_to_memberships();
