#!/bin/bash
grep -c 'quartz' /app/logs/coral.log > /app/count.txt
