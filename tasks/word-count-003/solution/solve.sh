#!/bin/bash
wc -c < /app/docs/silent_sage.txt > /app/answer.txt
