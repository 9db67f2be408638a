#!/bin/bash
grep -c 'WARN' /app/logs/cedar.log > /app/count.txt
