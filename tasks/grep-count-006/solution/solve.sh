#!/bin/bash
grep -c 'lantern' /app/logs/hollow.log > /app/pond_count.txt
