#!/bin/bash
wc -w < /app/docs/happy_fox.txt > /app/answer.txt
