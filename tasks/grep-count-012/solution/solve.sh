#!/bin/bash
grep -c 'summit' /app/logs/eagle.log > /app/count.txt
