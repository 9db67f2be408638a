#!/bin/bash
grep -c 'ERROR' /app/logs/shell.log > /app/count.txt
