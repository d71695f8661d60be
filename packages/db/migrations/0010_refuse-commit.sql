-- Fails the statement that calls it, and with it the transaction: a keyed create sends its insert,
-- a check that calls this when the transaction must not commit, and COMMIT in one write, and after
-- the error that COMMIT can only roll back (task-batch.ts, insertKeyedInOneWrite).
CREATE OR REPLACE FUNCTION sluice_refuse_commit(reason text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION '%', reason USING ERRCODE = 'SLR01';
END;
$$;
