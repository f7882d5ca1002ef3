-- A membership carries its group's creation and deletion times, kept by the triggers below, so
-- that the groups a user may see, their number and their first page in the default order are
-- one range of one index of the user's memberships: a member of 1,000 groups no longer looks
-- every one of them up in `groups` for each page (docs/benchmarks.md, "API").
ALTER TABLE memberships ADD COLUMN group_created_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE memberships ADD COLUMN group_deleted_at INTEGER;

UPDATE memberships SET
    group_created_at = (SELECT created_at FROM groups WHERE groups.id_group = memberships.id_group),
    group_deleted_at = (SELECT deleted_at FROM groups WHERE groups.id_group = memberships.id_group);

CREATE INDEX memberships_visible ON memberships (id_user, group_deleted_at, group_created_at, id_group);

CREATE TRIGGER memberships_group_times AFTER INSERT ON memberships
BEGIN
    -- No such group: the foreign key refuses the row; NOT NULL must not refuse it first.
    UPDATE memberships SET
        group_created_at = COALESCE((SELECT created_at FROM groups WHERE id_group = NEW.id_group), 0),
        group_deleted_at = (SELECT deleted_at FROM groups WHERE id_group = NEW.id_group)
    WHERE id_user = NEW.id_user AND id_group = NEW.id_group;
END;

CREATE TRIGGER groups_times_to_memberships AFTER UPDATE OF created_at, deleted_at ON groups
BEGIN
    UPDATE memberships SET group_created_at = NEW.created_at, group_deleted_at = NEW.deleted_at
    WHERE id_group = NEW.id_group;
END;
