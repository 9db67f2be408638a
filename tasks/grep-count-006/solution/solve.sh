#!/bin/bash
grep -c 'pond' /app/logs/hollow.log > /app/count.txt
